"""One rule for which files of a variant count (kbuild.digest.variant_files / is_bytecode), used
by the digest the build records, the files publish uploads, the hub listings the loaders fetch
and the cache's checks. Each side used to spell the rule itself; where two spellings differed, a
variant published by one could not be loaded by the other."""

from __future__ import annotations

import json
import os

import pytest

from builder.publish.integrity import regular_files, verify_variant
from kbuild.cache import verify_fetched
from kbuild.digest import digest_tree, git_blob_oid, is_bytecode, variant_files, verify_tree
from kbuild.errors import IntegrityError
from kbuild.hubs.base import RemoteFile

# (path, counts): every kind of place bytecode turns up in a variant folder, and look-alikes that
# are the build's files.
ENTRIES = [
    ("__init__.py", True),
    ("_ops.py", True),
    ("layers/norm.py", True),
    ("layers/__init__.pyi", True),
    ("__pycache__/__init__.cpython-311.pyc", False),
    ("layers/__pycache__/norm.cpython-313.pyc", False),
    ("stray.pyc", False),
    ("layers/old.pyc", False),
    ("data/__pycache__", False),  # a plain file of that name: a hub listing skips it too
    ("notes.pyc.txt", True),
    ("pycache/x.py", True),
]


def make_folder(root, entries=ENTRIES):
    for rel, _ in entries:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(f"# {rel}\n")
    return root


def test_the_folder_rule_and_the_path_rule_agree(tmp_path):
    root = make_folder(tmp_path)
    (root / "metadata.json").write_text("{}")
    counted = sorted([rel for rel, counts in ENTRIES if counts] + ["metadata.json"])
    assert list(variant_files(root)) == counted
    for rel, counts in ENTRIES:
        assert is_bytecode(rel) is not counts, rel
    # what a hub lists (path by path) is what the folder holds (walked)
    walked = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    assert [rel for rel in walked if not is_bytecode(rel)] == counted


def test_digest_publish_and_cache_count_the_same_files(tmp_path):
    """The build's digest covers what publish uploads (less metadata.json), and a folder fetched
    from a hub listing that skipped bytecode passes the runtime's checks."""
    built = make_folder(tmp_path / "built")
    digest = digest_tree(built)
    meta = {"name": "demo", "version": 1, "license": "Apache-2.0", "python-depends": [], "id": "_demo_cpu_abc1234",
            "backend": {"type": "cpu", "archs": []}, "digest": {"algorithm": "sha256", "files": digest}}
    (built / "metadata.json").write_text(json.dumps(meta))
    assert list(digest) == [rel for rel in variant_files(built) if rel != "metadata.json"]
    uploaded = verify_variant(built, meta)
    assert list(uploaded) == list(variant_files(built)) == list(regular_files(built))

    # the loader's side: a hub lists every file but bytecode; the fetched copy holds just those
    fetched = tmp_path / "fetched"
    for rel, path in uploaded.items():
        (fetched / rel).parent.mkdir(parents=True, exist_ok=True)
        (fetched / rel).write_bytes(path.read_bytes())
    listed = [RemoteFile(rel, git_blob_oid(path), path.stat().st_size) for rel, path in uploaded.items()
              if not is_bytecode(rel)]
    verify_tree(fetched, digest)
    marker = verify_fetched(fetched, listed, "o/demo@abc")
    assert sorted(marker["files"]) == sorted(uploaded)


def test_linked_files_count_and_linked_folders_are_not_entered(tmp_path):
    """The Hugging Face cache links each snapshot file to its blob: linked files count. A linked
    folder is listed only when asked for folders (publish refuses it), never walked into."""
    blobs, root = tmp_path / "blobs", tmp_path / "snapshot"
    (blobs / "pkg").mkdir(parents=True)
    (blobs / "__init__.py").write_text("")
    (blobs / "pkg" / "mod.py").write_text("")
    root.mkdir()
    os.symlink(blobs / "__init__.py", root / "__init__.py")
    os.symlink(blobs / "pkg", root / "pkg")
    assert list(variant_files(root)) == ["__init__.py"]
    assert list(variant_files(root, folders=True)) == ["__init__.py", "pkg"]
    assert list(digest_tree(root)) == ["__init__.py"]


@pytest.mark.parametrize("rel", ["pkg/__pycache__", "__pycache__"])
def test_a_bytecode_folder_is_never_listed_even_as_a_folder(tmp_path, rel):
    (tmp_path / rel).mkdir(parents=True)
    (tmp_path / rel / "m.cpython-311.pyc").write_bytes(b"\0")
    assert rel not in variant_files(tmp_path, folders=True)


@pytest.mark.parametrize("signature", ["metadata.json.sig", "metadata.json.sigstore"])
def test_a_detached_signature_is_outside_the_digest_and_travels_with_the_variant(tmp_path, signature):
    """A signature over metadata.json cannot be in the digest metadata.json records: the digest,
    publish's check and the fetched copy's check all leave it out (as Hugging Face's verifier does),
    while publish uploads it and a fetch keeps it. Only at the root: deeper, it is a file like any other."""
    built = make_folder(tmp_path / "built")
    (built / "layers" / signature).write_text("a file of the kernel's own")
    digest = digest_tree(built)
    assert f"layers/{signature}" in digest
    meta = {"name": "demo", "version": 1, "license": "Apache-2.0", "python-depends": [], "id": "_demo_cpu_abc1234",
            "backend": {"type": "cpu", "archs": []}, "digest": {"algorithm": "sha256", "files": digest}}
    (built / "metadata.json").write_text(json.dumps(meta))
    (built / signature).write_text("-----BEGIN SSH SIGNATURE-----\n")
    assert digest_tree(built) == digest  # the signature changes no digest
    verify_tree(built, digest)
    uploaded = verify_variant(built, meta)
    assert signature in uploaded and signature in variant_files(built)
    fetched = tmp_path / "fetched"
    for rel, path in uploaded.items():
        (fetched / rel).parent.mkdir(parents=True, exist_ok=True)
        (fetched / rel).write_bytes(path.read_bytes())
    listed = [RemoteFile(rel, git_blob_oid(path), path.stat().st_size) for rel, path in uploaded.items()]
    marker = verify_fetched(fetched, listed, "o/demo@abc")
    assert signature in marker["files"]
    # a signature file the hub's listing vouches for is checked against its blob id like metadata.json
    (fetched / signature).write_text("changed")
    with pytest.raises(IntegrityError, match=f"{signature} does not match the hub's blob id"):
        verify_fetched(fetched, listed, "o/demo@abc")
