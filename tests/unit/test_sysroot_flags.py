"""Sysroot names and flags by value: an unknown one is a one-line error, its libraries go first."""

from __future__ import annotations

import shutil

import pytest

from builder.commands.main import main
from builder.toolchains.sysroot import Sysroot

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")


def test_an_unknown_sysroot_is_a_one_line_error(capsys):
    assert main(["toolchain", "install", "sysroot-2.99"]) != 0
    err = capsys.readouterr().err
    assert "unknown toolchain 'sysroot-2.99'" in err and "manylinux_2_99" in err and "Traceback" not in err


def test_sysroot_flags_put_its_libraries_first(tmp_path):
    s = Sysroot(tmp_path, "2.28")
    assert s.cxx_flags == (f"--sysroot={tmp_path}",)
    assert s.nvcc_flags == ("-Xcompiler", f"--sysroot={tmp_path}")
    lib = tmp_path / "usr" / "lib" / "x86_64-linux-gnu"
    assert s.link_flags[:2] == (f"--sysroot={tmp_path}", f"-B{lib}/") and f"-L{lib}" in s.link_flags
