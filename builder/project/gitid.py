"""Source identity: the kernel folder's git tree id (the build id) and whether it is dirty."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from builder.layout import BUILD_DIR, WORK_DIR
from kbuild_common import proc
from kbuild_common.errors import CommandError


@dataclass(frozen=True)
class SourceId:
    tree: str  # full git tree id (or a content hash outside git)
    commit: str | None
    dirty: bool

    @property
    def short(self) -> str:
        """What goes into OPS_NAME: 7 hex of the tree id, plus `_dirty`."""
        return self.tree[:7] + ("_dirty" if self.dirty else "")


def source_id(folder: Path, exclude: tuple[str, ...] = (BUILD_DIR, WORK_DIR)) -> SourceId:
    """Identify `folder`'s sources: its tree at HEAD and whether tracked files changed since."""
    folder = folder.resolve()
    git = _git_state(folder)
    if git is not None:
        return git
    return SourceId(_content_hash(folder, exclude), None, False)


def _git(folder: Path, *args: str) -> str | None:
    try:
        return proc.run(["git", "-C", str(folder), *args], timeout=60, what="git").stdout.strip()
    except CommandError:
        return None


def _git_state(folder: Path) -> SourceId | None:
    top = _git(folder, "rev-parse", "--show-toplevel")
    if top is None:
        return None
    rel = folder.relative_to(Path(top).resolve()).as_posix()
    tree = _git(folder, "rev-parse", f"HEAD:{rel}" if rel != "." else "HEAD^{tree}")
    if tree is None:  # not committed yet: everything in it is a change
        return SourceId(_content_hash(folder, (BUILD_DIR, WORK_DIR)), None, True)
    commit = _git(folder, "rev-parse", "HEAD")
    status = _git(folder, "status", "--porcelain", "--untracked-files=no", "--", ".")
    return SourceId(tree, commit, bool(status))


def _content_hash(folder: Path, exclude: tuple[str, ...]) -> str:
    h = hashlib.sha1()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        rel = path.relative_to(folder)
        if rel.parts[0] in exclude or "__pycache__" in rel.parts or rel.parts[0].startswith("."):
            continue
        h.update(rel.as_posix().encode() + b"\0" + hashlib.sha1(path.read_bytes()).digest())
    return h.hexdigest()


def stale_reason(metadata: dict, now: SourceId) -> str | None:
    """Why the variant is not a build of the kernel folder as it is now, or None. A build outside
    git, or of uncommitted sources, is the dirty check's business, not this one's."""
    built = (metadata.get("provenance") or {}).get("kernel")
    if not built or built.get("dirty") or not built.get("tree"):
        return None
    if now.tree != built["tree"]:
        return f"was built from sources {built['tree'][:7]}; the kernel folder is now at {now.tree[:7]}"
    if now.dirty:
        return "was built from the committed sources, which have uncommitted changes since"
    return None
