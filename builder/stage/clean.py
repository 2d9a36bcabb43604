"""`kbuild clean [DIR] [--stale] [--dry-run]`: remove what builds leave in a kernel folder.

Without `--stale`: every variant in build/ and the whole .kbuild/ (objects, logs, the ninja graph;
the next build starts cold, except for the compile cache). With `--stale`: only what no longer
matches the sources — variants built from other sources than the folder holds now (what
`kbuild publish` would refuse), variants whose metadata cannot be read, and the leftovers of
interrupted builds (`build/.<variant>.tmp-*`) — so the current builds stay publishable.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from builder.layout import BUILD_DIR, WORK_DIR
from builder.project.gitid import source_id, stale_reason
from builder.project.workspace import kernel_dirs


@dataclass(frozen=True)
class Removal:
    path: Path
    why: str
    size: int


def clean(folder: Path, stale_only: bool, dry_run: bool) -> Iterator[Removal]:
    """Clean each kernel of `folder` (one, or a workspace's members): each removal, made unless
    `dry_run`, as it is made; a build/ left empty goes too."""
    for kernel in kernel_dirs(folder):
        for removal in plan_clean(kernel.resolve(), stale_only=stale_only):
            if not dry_run:
                remove(removal)
            yield removal
        build_dir = kernel / BUILD_DIR
        if not stale_only and not dry_run and build_dir.is_dir() and not any(build_dir.iterdir()):
            build_dir.rmdir()


def plan_clean(kernel: Path, stale_only: bool) -> list[Removal]:
    """What `kbuild clean` removes from the kernel folder `kernel`, with a reason for each."""
    build, work = kernel / BUILD_DIR, kernel / WORK_DIR
    found = []
    entries = sorted(build.iterdir()) if build.is_dir() else []
    now = source_id(kernel) if stale_only and entries else None
    for entry in entries:
        if entry.name.startswith(".") and ".tmp-" in entry.name:
            found.append(Removal(entry, "left by an interrupted build", _size(entry)))
        elif not entry.is_dir() or entry.name.startswith("."):
            continue
        elif not stale_only:
            found.append(Removal(entry, "a built variant", _size(entry)))
        elif why := _stale(entry, now):
            found.append(Removal(entry, why, _size(entry)))
    if not stale_only and work.is_dir():
        found.append(Removal(work, "objects, logs and the ninja graph", _size(work)))
    return found


def remove(removal: Removal) -> None:
    if removal.path.is_dir() and not removal.path.is_symlink():
        shutil.rmtree(removal.path)
    else:
        removal.path.unlink(missing_ok=True)


def _stale(variant: Path, now) -> str | None:
    try:
        metadata = json.loads((variant / "metadata.json").read_text())
    except (OSError, ValueError):
        return "no readable metadata.json"
    return stale_reason(metadata, now)


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())
