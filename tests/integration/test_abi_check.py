"""builder.stage.abi_check on libraries linked here with the real g++."""

import shutil
import subprocess
from pathlib import Path

import pytest

from builder.stage.abi_check import library_problems
from builder.toolchains.binary.elf import ELF

SOURCE = '#include <sstream>\nstd::string f(long x) { std::ostringstream s; s << x; return s.str(); }\n'


def link(tmp_path: Path, *flags: str) -> Path:
    src = tmp_path / "f.cpp"
    src.write_text(SOURCE)
    out = tmp_path / f"f{len(flags)}.so"
    subprocess.run(["g++", "-shared", "-fPIC", str(src), "-o", str(out), *flags], check=True)
    return out


pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")


def test_shared_libstdcxx_is_fine(tmp_path):
    assert library_problems(link(tmp_path, "-l:libstdc++.so.6"), ELF) == []


def test_static_libstdcxx_is_reported(tmp_path):
    problems = library_problems(link(tmp_path, "-static-libstdc++", "-static-libgcc"), ELF)
    assert len(problems) == 1 and "static copy of libstdc++" in problems[0]
