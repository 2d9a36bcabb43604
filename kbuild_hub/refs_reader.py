"""A bare repo's refs and commit headers read in-process (dulwich), for the hub's hot reads.

Every API request resolves a revision and every page reads a repo's branches; a `git
for-each-ref` process each time cost ~3 ms, and the index reads every repo's. dulwich reads the
loose refs and packed-refs as git writes them (git's lock-and-rename keeps each file whole), so
a read sees a branch's old or new commit, as for-each-ref would. Writes stay with git
(`update-ref` with the expected old value), so a stale read can never move a branch wrongly.
"""

from __future__ import annotations

import os
import time
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING, cast

from dulwich.errors import NotCommitError
from dulwich.objects import Commit
from dulwich.refs import DiskRefsContainer
from dulwich.repo import Repo

if TYPE_CHECKING:
    from dulwich.refs import Ref

SCANNED = ("refs/heads", "refs/tags")  # what for-each-ref lists by default here
RACY_S = 2.0  # a stamp younger than this may hide a change made in the same timestamp tick


def read_refs(repo: Path, *patterns: str) -> dict[str, str]:
    """Full ref name -> commit SHA under `patterns` (a full name, or a prefix ending at a `/`
    boundary, as for-each-ref matches them; default: branches and tags); annotated tags peeled."""
    container = DiskRefsContainer(str(repo))
    found: dict[str, str] = {}
    for pattern in patterns or SCANNED:
        base = pattern.rstrip("/")
        exact = container.read_ref(_ref(base))  # the pattern may name one ref …
        if exact is not None and not exact.startswith(b"ref: "):
            found[base] = exact.decode()
        for raw_name, raw_sha in container.as_dict(_ref(base)).items():  # … and prefixes the refs below it
            if raw_name:  # b"": the base itself, read above
                found[f"{base}/{raw_name.decode(errors='surrogateescape')}"] = raw_sha.decode()
    peel = [name for name in found if name.startswith("refs/tags/")]
    if peel:  # a tag may name a tag object: the commit is what callers resolve to
        with closing(Repo(str(repo))) as r:
            for name in peel:
                found[name] = r.get_peeled(_ref(name)).decode()
    return dict(sorted(found.items()))  # in for-each-ref's order


def _ref(name: str) -> Ref:
    # dulwich's newer releases type a ref name as Ref, a NewType of bytes (pyproject asks for older ones too)
    return cast("Ref", name.encode())


def refs_stamp(repo: Path, now: float | None = None) -> tuple | None:
    """What changes whenever a branch or tag is made, moved or removed: git writes a ref as
    `<name>.lock` renamed over `<name>` (its folder's mtime moves) and packs refs by rewriting
    packed-refs. None while a stamp is too fresh to trust: a change in the same clock tick would
    leave it unchanged (git's "racy" rule), so the caller reads the refs then. Covers names right
    under refs/heads and refs/tags (vN, main), which is what the pages' index shows."""
    now = time.time() if now is None else now
    stamp: list[tuple[int, int, int] | None] = []
    for name in ("refs/heads", "refs/tags", "packed-refs"):
        try:
            st = os.stat(repo / name)
        except FileNotFoundError:
            stamp.append(None)
            continue
        if now - st.st_mtime < RACY_S:
            return None
        stamp.append((st.st_ino, st.st_mtime_ns, st.st_size))
    return tuple(stamp)


def read_commit(repo: Path, oid: str) -> Commit | None:
    """The commit object `oid`, or None when the repo has no commit of that id."""
    with closing(Repo(str(repo))) as r:
        try:
            found = r[oid.encode()]
        except (KeyError, ValueError, NotCommitError):
            return None
    return found if isinstance(found, Commit) else None
