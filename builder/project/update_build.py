"""`kbuild update-build`: rewrite an edition 4 build.toml as edition 5, in place, keeping its
comments, key order and formatting (tomlkit round-trips the file; only what changes is touched).

Edition 4 differs from 5 in two ways kbuild reads (manifest.py): it has no `edition` key, and it
spelled a Python-only kernel `universal = true` where edition 5 has a `[torch-noarch]` table. The
rewrite adds `edition = 5` as the last key of `[general]` (tomlkit has no public insert at a
position, and its private one changed between releases) and turns `universal` into that table;
then the new text is read back and must give the same manifest as the old one did (so the same variants are planned),
or nothing is written. The file is replaced atomically.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

import tomlkit
from tomlkit.exceptions import TOMLKitError

from builder.errors import KbuildError, ManifestError
from builder.project.manifest import CURRENT_EDITION, parse_manifest


@dataclass(frozen=True)
class Upgrade:
    path: Path
    edition: int  # what the file is now
    text: str | None  # the rewritten file; None when it is current
    changes: tuple[str, ...] = ()

    @property
    def due(self) -> bool:
        return self.text is not None


def plan_upgrade(path: Path) -> Upgrade:
    """What `kbuild update-build` would write for the build.toml at `path` (checked: the result
    reads as the same kernel)."""
    text = path.read_text(encoding="utf-8")
    old = parse_manifest(path, text, notify=False)  # every error of the old file, as kbuild check says it
    doc = tomlkit.parse(text)
    general = doc["general"]
    if "edition" in general:
        return Upgrade(path, int(general["edition"]), None)
    changes = []
    general.add("edition", CURRENT_EDITION)  # after [general]'s last key, before its sub-tables
    changes.append(f"[general] edition = {CURRENT_EDITION}")
    if "universal" in general:
        universal = bool(general["universal"])
        general.remove("universal")
        if universal:
            doc.add("torch-noarch", tomlkit.table())
            changes.append("[general] universal = true -> [torch-noarch]")
        else:
            changes.append("[general] universal = false removed (edition 5 has no such key)")
    new_text = tomlkit.dumps(doc)
    try:
        new = parse_manifest(path, new_text)
    except (ManifestError, TOMLKitError) as e:
        raise KbuildError(f"{path}: the rewritten build.toml does not read ({e}); nothing written") from None
    if replace(new, path=old.path) != old:
        raise KbuildError(f"{path}: the rewritten build.toml would describe another kernel than this one; "
                          "nothing written (please report this)")
    return Upgrade(path, 4, new_text, tuple(changes))


def write_upgrade(upgrade: Upgrade) -> None:
    """Replace the file with the upgraded text: a temporary file beside it, renamed over it."""
    fd, tmp = tempfile.mkstemp(prefix=".build.toml.", dir=upgrade.path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(upgrade.text)
        os.chmod(tmp, upgrade.path.stat().st_mode & 0o777)
        os.replace(tmp, upgrade.path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
