"""The build.toml readers, one per edition (v4.py, v5.py, v6.py on reader.py), each normalizing
its edition's spelling to the one model the planner uses (builder/project/model.py), as
kernels-data reads its v4/v5/v6 files. `read` picks the reader by `[general] edition`."""

from __future__ import annotations

from pathlib import Path

from builder.project.editions.v4 import Edition4
from builder.project.editions.v5 import Edition5
from builder.project.editions.v6 import Edition6
from builder.project.model import Manifest, Where

READERS = {4: Edition4, 5: Edition5, 6: Edition6}  # edition 4 is the one without an `edition` key
EDITIONS = tuple(READERS)
CURRENT_EDITION = 6  # what kbuild update-build and kbuild init write


def edition_of(data: dict) -> int | None:
    """The edition a parsed build.toml is written in; None when `edition` is not an integer (the
    edition 5 reader then reports its type, with every other error)."""
    general = data.get("general")
    if not isinstance(general, dict) or "edition" not in general:
        return 4 if isinstance(general, dict) else 5  # no [general] at all: reported as missing
    edition = general["edition"]
    return edition if isinstance(edition, int) and not isinstance(edition, bool) else None


def read(path: Path, data: dict, lines: dict, kernel_builder: bool, notify: bool) -> Manifest:
    """The manifest `data` (the build.toml at `path`, parsed) describes, or a ManifestError with
    every error the file has."""
    where = Where(path, lines)
    if "workspace" in data:
        raise where.error(("workspace",), "this is a workspace manifest, not a kernel's build.toml")
    edition = edition_of(data)
    if edition is not None and edition not in READERS:
        raise where.error(("general", "edition"), f"unsupported edition {edition} "
                          f"(supported: {', '.join(map(str, EDITIONS))})")
    reader = READERS[edition if edition is not None else 5]
    return reader(path, data, lines, kernel_builder, notify).manifest()
