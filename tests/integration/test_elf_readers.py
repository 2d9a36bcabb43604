"""The ELF readers (builder/toolchains/binary/: elf.py, gnu_versions.py) on small files cc makes:
the strings of the dynamic tags, and a file without dynamic sections."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from builder.toolchains.binary import for_os, gnu_versions


def _cc(tmp_path: Path, *args: str) -> None:
    cc = shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler")
    (tmp_path / "f.c").write_text("int f(void) { return 1; }\n")
    subprocess.run([cc, str(tmp_path / "f.c"), *args], check=True, cwd=tmp_path)


def test_an_elf_file_without_dynamic_sections_has_no_symbol_versions_and_imports_nothing(tmp_path):
    """An object file has no .dynamic and no .dynsym: the GNU version readers answer "none" (they
    raised AttributeError on the missing section)."""
    _cc(tmp_path, "-c", "-o", "f.o")
    assert gnu_versions.required(tmp_path / "f.o") == {}
    assert gnu_versions.exports(tmp_path / "f.o") is None
    assert gnu_versions.unversioned_imports(tmp_path / "f.o") == set()


def test_the_dynamic_tags_strings_are_read(tmp_path):
    """DT_NEEDED, DT_RUNPATH ($ORIGIN expanded) and DT_SONAME, which pyelftools gives as attributes
    its types do not declare (elf_file.tag_string)."""
    (tmp_path / "f.map").write_text("F_1 { global: f; local: *; };\n")
    _cc(tmp_path, "-shared", "-fPIC", "-o", "libf.so", "-Wl,-soname,libf.so.1", "-Wl,--enable-new-dtags",
        "-Wl,-rpath,$ORIGIN/deps", "-Wl,--version-script,f.map", "-Wl,--no-as-needed", "-lm")
    library = for_os("linux").library(tmp_path / "libf.so")
    assert "libm.so.6" in library.needed and library.runpath == (str(tmp_path / "deps"),)
    found = gnu_versions.exports(tmp_path / "libf.so")
    assert found is not None
    soname, symbols = found
    assert soname == "libf.so.1" and [(e.name, e.version, e.default) for e in symbols] == [("f", "F_1", True)]
