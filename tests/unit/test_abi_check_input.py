"""What the ABI check says of a file that is no ELF object, without running a tool."""

import shutil

import pytest

from builder.stage.abi_check import library_problems


pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")


def test_not_elf(tmp_path):
    bad = tmp_path / "x.so"
    bad.write_text("not elf")
    assert "not a readable ELF" in library_problems(bad)[0]
