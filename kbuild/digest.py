"""Which files make up a built variant, and their digests (docs/formats.md, "metadata.json").

The builder writes them with `digest_tree`; loaders check them with `verify_tree` before
importing, so a variant that was changed after it was built never runs. `variant_files` is the one
rule for which files of a variant folder count (staged, digested, published, fetched, cached);
`is_bytecode` the same rule for a path alone (hub listings).
"""

from __future__ import annotations

import base64
import hashlib
import os
from pathlib import Path

from .errors import IntegrityError

ALGORITHM = "sha256"
METADATA = "metadata.json"  # the file that records the digest, at the variant's root
# Detached signatures over metadata.json, at the variant's root: kbuild's SSH signature and Hugging
# Face's sigstore bundle. Like metadata.json they cannot be in the digest they vouch for, so the
# digest leaves them out (as Hugging Face's verifier does); they are published and fetched all the same
# (kbuild's outside build/<variant>/ on a hub, kbuild/repo_layout.py says where).
SIGNATURES = ("metadata.json.sig", "metadata.json.sigstore")
BYTECODE_DIR = "__pycache__"
_CHUNK = 1 << 20


def digest_tree(root: Path) -> dict[str, str]:
    """Relative posix path -> base64 sha256 for every file under `root` but the root's
    metadata.json, its signatures and bytecode, sorted by path."""
    root = Path(root)
    return {rel: file_digest(root / rel) for rel in sorted(_covered(root))}


def file_digest(path: Path, algorithm: str = ALGORITHM) -> str:
    """Standard, padded base64 of the file's sha256 (the form metadata.json stores; Hugging Face's
    format also allows sha512, which hub fronts check for other builders' variants)."""
    h = hashlib.new(algorithm)
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return base64.b64encode(h.digest()).decode("ascii")


def verify_tree(root: Path, expected: dict[str, str], algorithm: str = ALGORITHM, where: str | None = None) -> None:
    """Raise IntegrityError naming the first file (by path) that is missing, unexpected or
    changed; its message starts with `where` (default: the folder)."""
    root = Path(root)
    label = where or f"kernel variant {root}"
    present = _covered(root)
    for rel in sorted(present | set(expected)):
        if rel not in present:
            raise IntegrityError(f"{label}: {rel} is listed in metadata.json's digest but missing")
        if rel not in expected:
            raise IntegrityError(f"{label}: {rel} is not listed in metadata.json's digest (a file was added)")
        if file_digest(root / rel, algorithm) != expected[rel]:
            raise IntegrityError(f"{label}: {rel} does not match metadata.json's digest")


def is_bytecode(rel: str) -> bool:
    """Python's bytecode caches (`__pycache__/`, `*.pyc`), by relative posix path: whoever
    imports a variant writes them, no build does, so they are never digested, staged, published,
    fetched or compared."""
    return rel.endswith(".pyc") or BYTECODE_DIR in rel.split("/")


def variant_files(root: Path, *, folders: bool = False) -> dict[str, Path]:
    """Relative posix path -> path of each file of the variant folder `root`, sorted by path:
    every entry but folders and bytecode (is_bytecode), metadata.json included. Linked folders
    are never entered, linked files are listed: the Hugging Face cache stores every file of a
    snapshot as a link to its blob. With `folders`, the folders (linked ones too) are listed as
    well, for callers that check what each entry is."""
    root, found = Path(root), {}
    for dirpath, dirnames, filenames in os.walk(root):  # os.walk never follows linked folders
        dirnames[:] = [d for d in dirnames if d != BYTECODE_DIR]
        for name in filenames + (dirnames if folders else []):
            path = Path(dirpath, name)
            rel = path.relative_to(root).as_posix()
            if name in dirnames or not is_bytecode(rel):
                found[rel] = path
    return dict(sorted(found.items()))


def is_digested(rel: str) -> bool:
    """Whether metadata.json's digest covers the variant file `rel` (a relative posix path): every
    file but metadata.json and its detached signatures at the root (and bytecode, never listed)."""
    return rel != METADATA and rel not in SIGNATURES and not is_bytecode(rel)


def _covered(root: Path) -> set[str]:
    """What the digest covers: the variant's files but metadata.json (which records it), its
    signatures, and anything that is not a readable file (a dangling link, a fifo)."""
    return {rel for rel, path in variant_files(root).items() if is_digested(rel) and path.is_file()}


def git_blob_oid(path: Path) -> str:
    """The git blob id of a file (what hubs list for regular files), streamed."""
    h = hashlib.sha1()
    with open(path, "rb") as f:
        h.update(b"blob %d\0" % os.fstat(f.fileno()).st_size)
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()
