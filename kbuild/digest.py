"""Per-file digests of a built variant (DESIGN.md §5, metadata.json `digest`).

The builder writes them with `digest_tree`; loaders check them with `verify_tree` before
importing, so a variant that was changed after it was built never runs.
"""

from __future__ import annotations

import base64
import hashlib
import os
from pathlib import Path

ALGORITHM = "sha256"
_CHUNK = 1 << 20


class IntegrityError(ValueError):
    """A variant's files do not match the digest its metadata.json records."""


def digest_tree(root: Path) -> dict[str, str]:
    """Relative posix path -> base64 sha256 for every file under `root` but the root's
    metadata.json and bytecode, sorted by path."""
    root = Path(root)
    return {rel: file_digest(root / rel) for rel in sorted(_files(root))}


def file_digest(path: Path) -> str:
    """Standard, padded base64 of the file's sha256 (the form metadata.json stores)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return base64.b64encode(h.digest()).decode("ascii")


def verify_tree(root: Path, expected: dict[str, str]) -> None:
    """Raise IntegrityError naming the first file (by path) that is missing, unexpected or
    changed."""
    root = Path(root)
    present = _files(root)
    for rel in sorted(present | set(expected)):
        if rel not in present:
            _fail(root, f"{rel} is listed in metadata.json's digest but missing")
        if rel not in expected:
            _fail(root, f"{rel} is not listed in metadata.json's digest (a file was added)")
        if file_digest(root / rel) != expected[rel]:
            _fail(root, f"{rel} does not match metadata.json's digest")


def _files(root: Path) -> set[str]:
    found = set()
    # os.walk does not descend into linked folders, but a linked file counts: the Hugging Face
    # cache stores every file of a snapshot as a link to its blob.
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        for name in filenames:
            path = Path(dirpath, name)
            rel = path.relative_to(root).as_posix()
            if rel == "metadata.json" or name.endswith(".pyc") or not path.is_file():
                continue
            found.add(rel)
    return found


def _fail(root: Path, what: str) -> None:
    raise IntegrityError(f"kernel variant {root}: {what}")


def git_blob_oid(path: Path) -> str:
    """The git blob id of a file (what hubs list for regular files), streamed."""
    h = hashlib.sha1()
    with open(path, "rb") as f:
        h.update(b"blob %d\0" % os.fstat(f.fileno()).st_size)
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()
