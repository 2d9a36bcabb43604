"""An ELF file opened with pyelftools, for the ELF format's readers (elf.py, gnu_versions.py): a
file that is none, or cannot be read, is one UnreadableLibrary line naming it; the string of a
dynamic tag."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.elf.dynamic import DynamicTag
from elftools.elf.elffile import ELFFile

from builder.toolchains.binary.base import UnreadableLibrary


@contextmanager
def open_elf(path: Path) -> Iterator[ELFFile]:
    try:
        with path.open("rb") as f:
            yield ELFFile(f)
    except (OSError, ELFError) as e:
        raise UnreadableLibrary(path, f"not a readable ELF shared library ({e})") from None


def tag_string(tag: DynamicTag) -> str:
    """The string of a DT_NEEDED, DT_SONAME, DT_RUNPATH or DT_RPATH tag. pyelftools sets it as an
    attribute named after the tag (tag.needed, tag.soname, tag.runpath), which its types do not declare."""
    return str(getattr(tag, tag.entry.d_tag.removeprefix("DT_").lower()))
