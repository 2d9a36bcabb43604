"""`kbuild toolchain prune`: what leaves the toolchain store — the named toolchains (or all of
them) and always the leftovers of interrupted or failed installs."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from builder.toolchains.provision import ToolchainStore, disk_usage
from kbuild_common.errors import UsageError


@dataclass(frozen=True)
class Pruned:
    path: Path
    size: int
    name: str = ""  # an installed toolchain's name; "" for a leftover
    why: str = ""   # a leftover: what it is


def prune(store: ToolchainStore, names: list[str], every: bool, dry_run: bool) -> Iterator[Pruned]:
    """Each removal, made unless `dry_run`: the leftovers first, then the toolchains. Unknown
    names are refused before anything is removed."""
    if every and names:
        raise UsageError("prune: pass toolchain names or --all, not both")
    records = {r.name: r for r in store.list()}
    unknown = [n for n in names if n not in records]
    if unknown:
        raise UsageError(f"prune: no toolchain {', '.join(unknown)} in {store.root} "
                         f"(installed: {', '.join(records) or 'none'})")
    doomed = list(records.values()) if every else [records[n] for n in names]
    for path in store.leftovers():
        size = disk_usage(path)
        if not dry_run:
            store.remove_leftover(path)
        why = "the log of a failed install" if path.name.endswith(".install.log") else "left by an interrupted install"
        yield Pruned(path, size, why=why)
    for record in doomed:
        if not dry_run:
            store.remove(record.name)
        yield Pruned(Path(record.path), record.size_bytes, name=record.name)
