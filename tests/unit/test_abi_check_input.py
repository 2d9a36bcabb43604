"""What the ABI check says of a file that is no ELF object, or of a library in a format kbuild has
no module for, without running a tool."""

import shutil

import pytest

from builder.commands.main import main
from builder.stage.abi_check import library_problems
from builder.toolchains.binary import for_os
from builder.toolchains.binary.elf import ELF
from kbuild_common.errors import ExitCode, UsageError

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")


def test_not_elf(tmp_path):
    bad = tmp_path / "x.so"
    bad.write_text("not elf")
    assert "not a readable ELF" in library_problems(bad, ELF)[0]


def test_a_library_of_a_format_with_no_module_is_a_one_line_error_naming_it(tmp_path, capsys):
    folder = tmp_path / "torch29-metal-aarch64-darwin"  # a variant for macOS: its libraries are Mach-O
    folder.mkdir()
    (folder / "_ops_metal.abi3.so").write_bytes(b"\xcf\xfa\xed\xfe" + bytes(28))  # a 64-bit Mach-O header
    assert main(["check-abi", str(folder)]) == ExitCode.USAGE
    err = capsys.readouterr().err
    assert "darwin libraries are Mach-O files, which kbuild cannot check (it checks ELF, for linux)" in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    with pytest.raises(UsageError, match="windows libraries are PE files, which kbuild cannot check"):
        for_os("windows")
