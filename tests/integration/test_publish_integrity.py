"""`kbuild publish` uploads exactly what a build recorded (issue 10, finding 1): no links, no
special files, nothing edited, added or removed since the build, and no stale build of sources
that changed since. Real builds, the real CLI and a real local git hub; each refusal leaves the
hub as it was."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from tiny_kernel import INIT, bare, build, commit, git, hub, kernel, publish, tree  # noqa: F401


def nothing_published(hub) -> bool:
    return not bare(hub).exists() or "v1" not in git(bare(hub), "branch")


def all_objects(hub) -> bytes:
    """Every object of the hub repo, contents included (to prove a secret never got in)."""
    if not bare(hub).exists():
        return b""
    listing = subprocess.run(["git", "cat-file", "--batch-all-objects", "--batch"], cwd=bare(hub),
                             capture_output=True, check=True)
    return listing.stdout


def test_a_link_in_a_variant_is_refused_and_its_target_never_uploaded(kernel, hub, tmp_path, capsys):
    build(kernel)
    secret = tmp_path / "secret.txt"
    secret.write_text("TOKEN=hunter2-do-not-publish\n")
    os.symlink(secret, kernel / "build" / "torch-cpu" / "notes.txt")
    code, output = publish(kernel, hub, capsys=capsys)
    assert code == 7, output
    assert "build/torch-cpu/notes.txt: a symbolic link" in output and str(secret) in output
    assert nothing_published(hub) and b"hunter2" not in all_objects(hub)


def test_a_linked_folder_in_a_variant_is_refused(kernel, hub, tmp_path, capsys):
    build(kernel)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "key.pem").write_text("PRIVATE\n")
    os.symlink(tmp_path / "elsewhere", kernel / "build" / "torch-cuda" / "extra")
    code, output = publish(kernel, hub, capsys=capsys)
    assert code == 7 and "build/torch-cuda/extra: a symbolic link" in output, output
    assert nothing_published(hub)


def test_a_link_in_benchmarks_is_refused(kernel, hub, tmp_path, capsys):
    build(kernel)
    (tmp_path / "secret").write_text("s3cr3t\n")
    os.symlink(tmp_path / "secret", kernel / "benchmarks" / "data.txt")
    code, output = publish(kernel, hub, capsys=capsys)
    assert code == 7 and "benchmarks/data.txt: a symbolic link" in output, output
    assert nothing_published(hub) and b"s3cr3t" not in all_objects(hub)


def test_a_fifo_in_a_variant_is_refused(kernel, hub, capsys):
    build(kernel)
    os.mkfifo(kernel / "build" / "torch-cpu" / "pipe")
    code, output = publish(kernel, hub, capsys=capsys)
    assert code == 7 and "build/torch-cpu/pipe: not a regular file" in output, output
    assert nothing_published(hub)


@pytest.mark.parametrize("change, says", [
    ("edit", "changed since the build"),
    ("add", "not covered by metadata.json's digest"),
    ("remove", "listed in metadata.json's digest but missing"),
    ("no-digest", "no digest"),
])
def test_a_variant_that_does_not_match_its_digest_is_refused(kernel, hub, capsys, change, says):
    build(kernel)
    variant = kernel / "build" / "torch-cpu"
    init = variant / "__init__.py"
    if change == "edit":  # same size, mtime restored: only the bytes tell
        st = init.stat()
        text = init.read_text()
        init.write_text(text.replace("x * 2", "x * 3"))
        os.utime(init, ns=(st.st_atime_ns, st.st_mtime_ns))
        assert init.stat().st_size == st.st_size
    elif change == "add":
        (variant / "backdoor.py").write_text("import os\n")
    elif change == "remove":
        (variant / "_ops.py").unlink()
    else:
        meta = json.loads((variant / "metadata.json").read_text())
        del meta["digest"]
        (variant / "metadata.json").write_text(json.dumps(meta))
    code, output = publish(kernel, hub, capsys=capsys)
    assert code == 7, output
    assert "build/torch-cpu" in output and says in output and "kbuild build" in output
    assert nothing_published(hub)
    # The other variant alone is intact and publishes.
    assert publish(kernel, hub, "--variant", "torch-cuda")[0] == 0
    assert "build/torch-cpu/__init__.py" not in tree(hub, "v1")


def test_bytecode_left_by_running_the_build_is_neither_refused_nor_uploaded(kernel, hub):
    build(kernel)
    cache = kernel / "build" / "torch-cpu" / "__pycache__"
    cache.mkdir()
    (cache / "__init__.cpython-311.pyc").write_bytes(b"\x00bytecode")
    assert publish(kernel, hub)[0] == 0
    assert not [f for f in tree(hub, "v1") if "__pycache__" in f or f.endswith(".pyc")]


def test_a_build_of_sources_committed_over_since_is_refused_unless_allowed(kernel, hub, capsys):
    build(kernel)
    built = git(kernel, "rev-parse", "HEAD:").strip()
    (kernel / "torch-ext" / "tiny" / "__init__.py").write_text(INIT.format(body="def double(x):\n    return x + x\n",
                                                                             names=["double"]))
    commit(kernel)
    now = git(kernel, "rev-parse", "HEAD:").strip()
    code, output = publish(kernel, hub, capsys=capsys)
    assert code == 7 and "stale build" in output, output
    assert f"built from sources {built[:7]}" in output and f"now at {now[:7]}" in output
    assert f"hint: rebuild (kbuild build {kernel.resolve()}), or pass --allow-dirty" in output, output
    assert nothing_published(hub)
    assert publish(kernel, hub, "--allow-dirty")[0] == 0


def test_a_build_with_uncommitted_edits_since_is_refused(kernel, hub, capsys):
    build(kernel)
    (kernel / "torch-ext" / "tiny" / "__init__.py").write_text(INIT.format(body="def double(x):\n    return 2 * x\n",
                                                                             names=["double"]))
    code, output = publish(kernel, hub, capsys=capsys)
    assert code == 7 and "uncommitted changes since" in output and "stale build" in output, output
    # the hint a user follows: a rebuild alone would only be refused next as a dirty build
    assert f"hint: commit the changes, then rebuild (kbuild build {kernel.resolve()}), or pass --allow-dirty" \
        in output, output
    assert nothing_published(hub)
    build(kernel)  # rebuilt from the edit: now it is the dirty check that speaks
    code, output = publish(kernel, hub, capsys=capsys)
    assert code != 0 and "built from uncommitted changes" in output and "hint: commit and rebuild" in output
    commit(kernel)  # as both hints say: commit, rebuild, publish
    build(kernel)
    assert publish(kernel, hub)[0] == 0
