"""Binary formats: one module each for what a variant's libraries are on its os (elf.py: linux),
behind one interface (base.py), and the table below. The library checks (builder/stage/) ask the
format of the variant's os; adding a format (Mach-O for darwin, PE for windows) is a module and a
line in FORMATS.
"""

from __future__ import annotations

from builder.toolchains.binary.base import BinaryFormat, Floor, Library, Need, UnreadableLibrary
from builder.toolchains.binary.elf import ELF
from kbuild_common.errors import UsageError

FORMATS: dict[str, BinaryFormat] = {f.os: f for f in (ELF,)}
# the format of each os a variant may name (kbuild/variants.py), for the error of one without a module
FORMAT_NAMES = {"linux": "ELF", "darwin": "Mach-O", "windows": "PE"}


def for_os(os: str) -> BinaryFormat:
    """The format of the libraries of a variant for `os`; a one-line error when kbuild has no module for it."""
    if os in FORMATS:
        return FORMATS[os]
    known = ", ".join(f"{f.name}, for {f.os}" for f in FORMATS.values())
    what = f"are {FORMAT_NAMES[os]} files, which kbuild cannot check" if os in FORMAT_NAMES else \
        "are of a format kbuild does not know"
    raise UsageError(f"{os} libraries {what} (it checks {known})")


__all__ = ["FORMATS", "BinaryFormat", "Floor", "Library", "Need", "UnreadableLibrary", "for_os"]
