"""Plain-file copies of a local hub's git blobs, for serving: `<root>/.blobs/<oid[:2]>/<oid>`.

A download is then a bounded read of a regular file (any number of readers, ranges by seek), not
a git process per request holding the blob's pack mapped. Each blob is copied once, by one
`git cat-file blob` streamed in chunks, checked against its object id while it is written, and
renamed into place: a copy is complete and exact or absent. A blob id names its content
forever, so a copy never goes stale; `kbuild hub gc` removes the ones not used lately.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
import threading
import time
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kbuild.hubs.local_git import BareRepo
from kbuild_common import proc
from kbuild_common.errors import CommandError
from kbuild_hub.errors import HubError

FOLDER = ".blobs"
CHUNK = 1 << 20
_OID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


class BlobCopyFailed(HubError):
    http_status = 500


class BlobFiles:
    def __init__(self, root: Path):
        self.folder = Path(root) / FOLDER
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def path(self, repo: Path, oid: str, size: int) -> Path:
        """The plain file holding blob `oid` of the bare repository `repo`, copied first if needed.
        Concurrent callers for one blob wait for a single copy."""
        if not _OID.fullmatch(oid):
            raise BlobCopyFailed(f"{oid!r} is not a git object id")
        target = self.folder / oid[:2] / oid
        if _complete(target, size):
            return target
        with self._lock(oid):
            if not _complete(target, size):
                self._copy(repo, oid, size, target)
        return target

    def sweep(self, older_than_s: float) -> int:
        """Remove copies not modified (made or touched) for `older_than_s`; how many."""
        removed, now = 0, time.time()
        for copy in self.folder.glob("*/*"):
            try:
                if now - copy.stat().st_mtime > older_than_s:
                    copy.unlink()
                    removed += 1
            except FileNotFoundError:
                pass
        return removed

    def _lock(self, oid: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(oid, threading.Lock())

    def _copy(self, repo: Path, oid: str, size: int, target: Path) -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        # git's object id: the hash of "blob <size>\0" and the content
        digest = (hashlib.sha1 if len(oid) == 40 else hashlib.sha256)(b"blob %d\0" % size)
        fd, tmp = tempfile.mkstemp(prefix=f".{oid}.", dir=target.parent)
        try:
            written = 0
            with os.fdopen(fd, "wb") as out:
                for data in _blob_chunks(repo, oid):
                    digest.update(data)
                    out.write(data)
                    written += len(data)
            if written != size or digest.hexdigest() != oid:
                raise BlobCopyFailed(f"{repo}: blob {oid} read back as {written} bytes that do not hash to its id",
                                     hint="run `git fsck` in that repository")
            os.chmod(tmp, 0o444)
            os.replace(tmp, target)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)


def _blob_chunks(repo: Path, oid: str) -> Iterator[bytes]:
    """A blob's content, CHUNK at a time. A loose object (what a publish writes) is inflated
    here, its file read in chunks; a packed one is streamed by git, told to map its pack in small
    windows (by default it maps up to 1 GiB of it, all of which a big blob makes resident)."""
    loose = repo / "objects" / oid[:2] / oid[2:]
    try:
        f = loose.open("rb")
    except FileNotFoundError:
        f = None
    if f is not None:
        with f, _inflate_errors(repo, oid):
            inflate, header = zlib.decompressobj(), True
            while compressed := f.read(CHUNK):
                while compressed:
                    data = inflate.decompress(compressed, CHUNK)  # bounded: a zip bomb inflates a chunk at a time
                    compressed = inflate.unconsumed_tail
                    if header:
                        data, header = data.partition(b"\0")[2], False  # "blob <size>\0"
                    if data:
                        yield data
        return
    argv = ["git", "-c", "core.packedGitWindowSize=1m", "-c", "core.packedGitLimit=16m", "cat-file", "blob", oid]
    try:
        with proc.open_bytes(argv, env=BareRepo(repo).env, what="git cat-file") as stream:
            while data := stream.read(CHUNK):
                yield data
    except CommandError as e:
        raise BlobCopyFailed(f"{repo}: cannot read blob {oid}: {e}") from None


@contextmanager
def _inflate_errors(repo: Path, oid: str) -> Iterator[None]:
    try:
        yield
    except zlib.error as e:
        raise BlobCopyFailed(f"{repo}: loose object {oid} is corrupt ({e})",
                             hint="run `git fsck` in that repository") from None


def _complete(path: Path, size: int) -> bool:
    try:
        return path.stat().st_size == size
    except FileNotFoundError:
        return False
