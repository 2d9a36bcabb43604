"""The local hub's git storage, against real git: names, commits, reads, refs, concurrent
writers, `git clone`, and processes SIGKILLed in the middle of a commit."""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

import pytest

from kbuild_common import proc
from kbuild_common.errors import CommandError
from kbuild_common.notices import BuildNotice
from kbuild_hub import gitstore
from kbuild_hub.errors import (
    EntryNotFound,
    HubRepoNotFound,
    HubRevisionNotFound,
    InvalidPath,
    RefConflict,
    RepoExists,
    TooLarge,
)
from kbuild_hub.gitstore import FileAdd, GitStore, InvalidRevision, TreeEntry, with_retry

REPO_ROOT = Path(__file__).resolve().parents[2]
K = ("kernel", "org/k")


@pytest.fixture
def store(tmp_path) -> GitStore:
    s = GitStore(tmp_path / "hub")
    s.create_repo(*K)
    return s


def git(repo: Path, *args: str, check: bool = True) -> str:
    return subprocess.run(["git", "--git-dir", str(repo), *args], check=check, capture_output=True, text=True).stdout


def blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def files_at(store: GitStore, commit: str) -> dict[str, bytes]:
    return {e.path: store.read_file(*K, commit, e.path)
            for e in store.list_tree(*K, commit, recursive=True) if e.type == "file"}


def put(store: GitStore, files: dict[str, bytes], branch: str = "main", **kw) -> str:
    head = store.resolve(*K, branch)
    return store.commit(*K, branch, add=[FileAdd(p, d) for p, d in files.items()], message="put", parent=head, **kw)


@pytest.mark.parametrize("branch", ["-x", "a..b", "a/", "/a", ".x", "a/.x", "a.lock", "a b", "HEAD", "a//b",
                                    "x~1", "x^", "x:y", "a@{1}", "a.", "", "a\\b"])
def test_invalid_branch_names(store, branch):
    with pytest.raises(InvalidRevision):
        store.create_branch(*K, branch)
    with pytest.raises(InvalidRevision):
        store.commit(*K, branch, add=[FileAdd("a", b"")], message="m", parent=None, create_branch_from="main")


# -- repositories --------------------------------------------------------------------------------

def test_create_exists_list(tmp_path):
    s = GitStore(tmp_path / "hub")
    assert not s.exists(*K) and s.list_repos() == []
    assert s.create_repo(*K) is True
    assert s.exists(*K)
    with pytest.raises(RepoExists):
        s.create_repo(*K)
    assert s.create_repo(*K, exist_ok=True) is False
    s.create_repo("model", "org/m")
    s.create_repo("kernel", "a/z")
    assert s.list_repos() == [("model", "org/m"), ("kernel", "a/z"), ("kernel", "org/k")]
    assert s.list_repos("kernel") == [("kernel", "a/z"), ("kernel", "org/k")]
    main = s.branches(*K)["main"]
    info = s.commit_info(*K, main)
    assert (info["parents"], info["message"]) == ([], "initial commit")
    assert s.list_tree(*K, main) == [] and s.tags(*K) == {}
    assert list((tmp_path / "hub" / ".tmp").iterdir()) == []
    with pytest.raises(HubRepoNotFound):
        s.branches("model", "org/k")


def test_create_repo_race_has_one_winner(tmp_path):
    s = GitStore(tmp_path)
    results: list[bool] = []
    threads = [threading.Thread(target=lambda: results.append(s.create_repo(*K, exist_ok=True))) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [False] * 5 + [True]
    assert list(s.branches(*K)) == ["main"]


def test_git_environment_of_the_caller_is_ignored(store, tmp_path, monkeypatch):
    other = tmp_path / "other.git"
    subprocess.run(["git", "init", "-q", "--bare", str(other)], check=True)
    for name, value in {"GIT_DIR": other, "GIT_OBJECT_DIRECTORY": other / "objects", "GIT_INDEX_FILE": tmp_path / "i",
                        "GIT_AUTHOR_NAME": "", "GIT_COMMITTER_EMAIL": ""}.items():
        monkeypatch.setenv(name, str(value))
    sha = put(store, {"a": b"1"})
    assert store.read_file(*K, sha, "a") == b"1"
    assert not list((other / "objects").glob("??"))


# -- commits -------------------------------------------------------------------------------------

def test_commit_adds_replaces_and_deletes_files_and_folders(store, tmp_path):
    src = tmp_path / "big.bin"
    src.write_bytes(os.urandom(300_000))
    c1 = put(store, {"README.md": b"# k\n", "build/a/x.py": b"x", "build/a/sub/y.py": b"y", "build/b/z.py": b"z"})
    c2 = store.commit(*K, "main", add=[FileAdd("build/a/x.py", b"x2"), FileAdd("build/c/big.bin", src)],
                      message="Update\n\nbody", parent=c1)
    assert files_at(store, c2) == {"README.md": b"# k\n", "build/a/x.py": b"x2", "build/a/sub/y.py": b"y",
                                   "build/b/z.py": b"z", "build/c/big.bin": src.read_bytes()}
    c3 = store.commit(*K, "main", delete=["README.md"], delete_dirs=["build/a", "build/none"],
                      add=[FileAdd("build/a/new.py", b"n")], message="slice", parent=c2)
    assert files_at(store, c3) == {"build/a/new.py": b"n", "build/b/z.py": b"z", "build/c/big.bin": src.read_bytes()}
    assert store.resolve(*K, "main") == c3
    info = store.commit_info(*K, c2)
    assert info["oid"] == c2 and info["parents"] == [c1] and info["message"] == "Update\n\nbody"
    assert datetime.fromisoformat(info["date"]).tzinfo is not None
    assert git(store.repo_dir(*K), "rev-list", "--count", "main").strip() == "4"


def test_commit_rejects_bad_changes_without_moving_the_branch(store, tmp_path):
    c1 = put(store, {"a/b": b"1"})
    bad = [dict(add=[FileAdd("../x", b"")]), dict(add=[FileAdd(".git/config", b"")]), dict(delete=["/etc/passwd"]),
           dict(delete_dirs=["a/%2e%2e"]), dict(delete=["missing"]), dict(add=[FileAdd("a", b"")]),
           dict(add=[FileAdd("a/b/c", b"")]), dict(add=[FileAdd("x", tmp_path / "nope")])]
    for change in bad:
        with pytest.raises((InvalidPath, EntryNotFound, gitstore.HubError)):
            store.commit(*K, "main", message="bad", parent=c1, **change)
    with pytest.raises(TypeError):
        store.commit(*K, "main", add=[FileAdd("s", "text is not a source")], message="bad", parent=c1)
    with pytest.raises(InvalidRevision):
        store.commit(*K, "main", add=[FileAdd("s", b"")], message="bad", parent="main")
    assert store.resolve(*K, "main") == c1
    # replacing a file by a folder works when the file goes in the same commit
    c2 = store.commit(*K, "main", delete=["a/b"], add=[FileAdd("a/b/c", b"2")], message="m", parent=c1)
    assert files_at(store, c2) == {"a/b/c": b"2"}


def test_stale_parent_is_a_ref_conflict(store):
    c0 = store.resolve(*K, None)
    c1 = put(store, {"a": b"1"})
    with pytest.raises(RefConflict, match="not at"):
        store.commit(*K, "main", add=[FileAdd("b", b"2")], message="late", parent=c0)
    assert store.resolve(*K, "main") == c1
    # parent=None commits on top of whatever the head is
    c2 = store.commit(*K, "main", add=[FileAdd("b", b"2")], message="any head", parent=None)
    assert store.commit_info(*K, c2)["parents"] == [c1]
    with pytest.raises(HubRevisionNotFound):
        store.commit(*K, "nope", add=[FileAdd("b", b"2")], message="m", parent=None)
    with pytest.raises(HubRevisionNotFound):
        store.commit(*K, "nope", add=[FileAdd("b", b"2")], message="m", parent=c2)


def test_new_branch_is_created_only_if_still_absent(store):
    main = put(store, {"README.md": b"card"})
    v1 = store.commit(*K, "v1", add=[FileAdd("build/x/a", b"a")], message="v1", parent=None, create_branch_from="main")
    assert store.commit_info(*K, v1)["parents"] == [main]
    assert files_at(store, v1) == {"README.md": b"card", "build/x/a": b"a"}
    with pytest.raises(RefConflict, match="already exists"):
        store.commit(*K, "v1", add=[FileAdd("build/y/a", b"b")], message="v1", parent=None, create_branch_from=main)
    assert store.branches(*K) == {"main": main, "v1": v1}


def test_max_file_size(tmp_path):
    s = GitStore(tmp_path, max_file_size=1000)
    s.create_repo(*K)
    head = s.resolve(*K, None)
    src = tmp_path / "f"
    src.write_bytes(b"x" * 1001)
    for source in (b"x" * 1001, src):
        with pytest.raises(TooLarge, match="build/big.so"):
            s.commit(*K, "main", add=[FileAdd("ok", b"x" * 1000), FileAdd("build/big.so", source)], message="m",
                     parent=head)
    assert s.resolve(*K, "main") == head
    s.commit(*K, "main", add=[FileAdd("ok", b"x" * 1000)], message="m", parent=head)


def test_path_sources_with_odd_names(store, tmp_path):
    odd = tmp_path / "line\nbreak"
    odd.write_bytes(b"odd")
    plain = tmp_path / "plain"
    plain.write_bytes(b"plain")
    sha = put(store, {"o": odd, "p": plain, "b": b"bytes"})
    assert files_at(store, sha) == {"o": b"odd", "p": b"plain", "b": b"bytes"}


# -- reads ---------------------------------------------------------------------------------------

def test_list_tree_and_file_info(store):
    sha = put(store, {"README.md": b"r", "build/v1/a.py": b"aa", "build/v1/sub/b.py": b"bbb", "build/v2/c.py": b"c"})
    top = store.list_tree(*K, sha)
    assert [(e.path, e.type, e.size) for e in top] == [("README.md", "file", 1), ("build", "directory", 0)]
    assert top[0].oid == blob_id(b"r")
    assert [(e.path, e.type) for e in store.list_tree(*K, sha, "build")] == [
        ("build/v1", "directory"), ("build/v2", "directory")]
    assert [e.path for e in store.list_tree(*K, sha, "build/", recursive=True)] == [
        "build/v1", "build/v1/a.py", "build/v1/sub", "build/v1/sub/b.py", "build/v2", "build/v2/c.py"]
    assert [e.path for e in store.list_tree(*K, "main", recursive=True) if e.type == "file"] == [
        "README.md", "build/v1/a.py", "build/v1/sub/b.py", "build/v2/c.py"]
    assert store.file_info(*K, sha, "build/v1/a.py") == TreeEntry("build/v1/a.py", "file", 2, blob_id(b"aa"))
    folder = store.file_info(*K, sha, "build/v1")
    assert folder.type == "directory" and folder.oid == store.list_tree(*K, sha, "build")[0].oid
    for call in (lambda: store.list_tree(*K, sha, "nope"), lambda: store.list_tree(*K, sha, "README.md"),
                 lambda: store.file_info(*K, sha, "build/v3"), lambda: store.read_file(*K, sha, "build"),
                 lambda: store.open_file(*K, sha, "nope")):
        with pytest.raises(EntryNotFound):
            call()
    for call in (lambda: store.list_tree(*K, "0" * 40), lambda: store.file_info(*K, "1" * 40, "README.md"),
                 lambda: store.read_file(*K, "nope", "README.md"), lambda: store.commit_info(*K, "2" * 40)):
        with pytest.raises(HubRevisionNotFound):
            call()
    with pytest.raises(HubRepoNotFound):
        store.list_tree("kernel", "org/other", sha)
    with pytest.raises(InvalidPath):
        store.read_file(*K, sha, "../README.md")


def test_open_file_streams(store):
    data = os.urandom(3 << 20)
    sha = put(store, {"big.bin": data})
    with store.open_file(*K, sha, "big.bin") as f:
        assert f.read(10) == data[:10] and f.read() == data[10:]
    with store.open_file(*K, sha, "big.bin") as f:  # closing early must not hang
        f.read(1)
    assert store.read_file(*K, sha, "big.bin") == data


def test_failed_stream_raises_at_the_end(store):
    with proc.open_bytes(["git", "--git-dir", str(store.repo_dir(*K)), "cat-file", "blob", "0" * 40]) as f:
        with pytest.raises(CommandError, match="cat-file"):
            f.read()


def for_each_ref(repo: Path) -> dict[str, str]:
    out = git(repo, "for-each-ref", "--format=%(refname) %(objectname) %(*objectname)", "refs/heads", "refs/tags")
    refs = {}
    for line in out.splitlines():
        name, oid, peeled = line.split(" ")
        refs[name] = peeled or oid
    return refs


def test_refs_read_in_process_agree_with_git_through_packing_and_updates(store):
    """The store reads refs itself (kbuild_hub/refs_reader.py): loose, packed, a loose ref newer
    than its packed line, a deleted one, a branch with a slash and tags of both kinds, as git sees them."""
    repo = store.repo_dir(*K)
    c1 = put(store, {"a": b"1"})
    store.create_branch(*K, "v1", c1)
    store.create_branch(*K, "feature/x", c1)
    subprocess.run(["git", "--git-dir", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", "tag", "-a", "-m", "x",
                    "annotated", c1], check=True)
    git(repo, "pack-refs", "--all")
    assert not (repo / "refs" / "heads" / "v1").exists(), "packed"
    c2 = put(store, {"a": b"2"}, branch="v1")  # a loose v1 beside its packed line: the loose one wins
    store.create_branch(*K, "v2", c2)
    store.delete_branch(*K, "feature/x")  # gone from packed-refs
    expected = for_each_ref(repo)
    assert store._refs(repo) == expected
    assert store.branches(*K) == {"main": expected["refs/heads/main"], "v1": c2, "v2": c2}
    assert store.tags(*K) == {"annotated": c1}
    assert store._refs(repo, "refs/heads/v1") == {"refs/heads/v1": c2}
    assert store._refs(repo, "refs/heads/v") == {}  # a prefix matches at a `/` only, as for-each-ref


def test_resolve(store):
    repo = store.repo_dir(*K)
    c1 = put(store, {"a": b"1"})
    c2 = put(store, {"a": b"2"})
    git(repo, "update-ref", "refs/tags/light", c1)
    subprocess.run(["git", "--git-dir", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", "tag", "-a", "-m", "x",
                    "annotated", c1], check=True)
    store.create_branch(*K, "v1", c1)
    assert store.resolve(*K, None) == store.resolve(*K, "main") == c2
    assert store.resolve(*K, "v1") == store.resolve(*K, "refs/heads/v1") == store.resolve(*K, "refs%2Fheads%2Fv1") == c1
    assert store.resolve(*K, "light") == store.resolve(*K, "annotated") == store.resolve(*K, "refs/tags/annotated") == c1
    assert store.resolve(*K, c1) == c1 and store.resolve(*K, c1.upper()) == c1
    assert store.tags(*K) == {"annotated": c1, "light": c1}
    blob = store.file_info(*K, c2, "a").oid
    for rev in ("nope", "0" * 40, blob, c1[:12], "refs/heads/nope", "main~1", "../main"):
        with pytest.raises(HubRevisionNotFound):
            store.resolve(*K, rev)
    with pytest.raises(HubRepoNotFound):
        store.resolve("model", "org/k", None)


def test_branches(store):
    main = put(store, {"a": b"1"})
    assert store.create_branch(*K, "v1") == main
    assert store.create_branch(*K, "refs/heads/v2", main) == main
    with pytest.raises(RefConflict, match="v1"):
        store.create_branch(*K, "v1")
    with pytest.raises(RefConflict):
        store.create_branch(*K, "v1/x")  # git cannot hold both v1 and v1/x
    with pytest.raises(HubRevisionNotFound):
        store.create_branch(*K, "v3", "nope")
    assert store.branches(*K) == {"main": main, "v1": main, "v2": main}
    store.delete_branch(*K, "v1")
    assert list(store.branches(*K)) == ["main", "v2"]
    with pytest.raises(HubRevisionNotFound):
        store.delete_branch(*K, "v1")
    with pytest.raises(RefConflict, match="main"):
        store.delete_branch(*K, "main")


def test_stale_ref_lock_is_cleared_but_a_fresh_one_is_respected(store):
    lock = store.repo_dir(*K) / "refs" / "heads" / "main.lock"
    lock.write_text("")
    with pytest.raises(RefConflict, match="File exists"):
        put(store, {"a": b"1"})
    old = time.time() - gitstore.STALE_LOCK_S - 5
    os.utime(lock, (old, old))
    with pytest.warns(BuildNotice, match=r"removing .*main\.lock, left \d+s ago by a killed process"):
        sha = put(store, {"a": b"1"})
    assert store.resolve(*K, "main") == sha and not lock.exists()


# -- concurrency, git clients, crashes -----------------------------------------------------------

def test_concurrent_publishers_with_retry_all_land(store):
    errors = []

    def publish(worker: int) -> None:
        for n in range(3):
            def attempt(n=n):
                head = store.resolve(*K, "main")
                return store.commit(*K, "main", add=[FileAdd(f"build/w{worker}/f{n}", b"%d-%d" % (worker, n))],
                                    message=f"w{worker} n{n}", parent=head)
            try:
                with_retry(attempt, attempts=50)
            except Exception as e:  # surfaced below
                errors.append(e)

    threads = [threading.Thread(target=publish, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    head = store.resolve(*K, "main")
    assert files_at(store, head) == {f"build/w{w}/f{n}": b"%d-%d" % (w, n) for w in range(4) for n in range(3)}
    assert git(store.repo_dir(*K), "rev-list", "--count", head).strip() == "13"


def test_concurrent_commits_without_parent_are_rebased(store):
    def publish(worker: int) -> None:
        for n in range(3):
            store.commit(*K, "main", add=[FileAdd(f"w{worker}/f{n}", b"x")], message="any head", parent=None)

    threads = [threading.Thread(target=publish, args=(w,)) for w in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    head = store.resolve(*K, "main")
    assert sorted(files_at(store, head)) == sorted(f"w{w}/f{n}" for w in range(3) for n in range(3))
    assert git(store.repo_dir(*K), "rev-list", "--count", head).strip() == "10"


def test_git_clone_shows_the_files(store, tmp_path):
    main = put(store, {"README.md": b"card\n", "build/v/x.py": b"x = 1\n"})
    v1 = store.commit(*K, "v1", add=[FileAdd("build/v/y.py", b"y")], message="v1", parent=None,
                      create_branch_from="main")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(store.repo_dir(*K)), str(clone)], check=True)
    assert (clone / "README.md").read_bytes() == b"card\n" and (clone / "build/v/x.py").read_bytes() == b"x = 1\n"
    assert subprocess.run(["git", "-C", str(clone), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip() == main
    subprocess.run(["git", "-C", str(clone), "checkout", "-q", v1], check=True)
    assert (clone / "build/v/y.py").read_bytes() == b"y"


KILL_CHILD = """
import sys
from pathlib import Path
from kbuild_hub.gitstore import FileAdd, GitStore
root, trial, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
store = GitStore(Path(root))
head = store.resolve("kernel", "org/k", "main")
adds = [FileAdd(f"build/t/f{i}", (b"trial %d file %d\\n" % (trial, i)) * (20 + i)) for i in range(n)]
print("ready", flush=True)
store.commit("kernel", "org/k", "main", add=adds, delete_dirs=["build/t"], message=f"trial {trial}", parent=head)
"""
KILL_FILES = 200


def expected_slice(trial: int) -> dict[str, str]:
    return {f"build/t/f{i}": blob_id((b"trial %d file %d\n" % (trial, i)) * (20 + i)) for i in range(KILL_FILES)}


def run_child(root: Path, trial: int, kill_after: float | None) -> float:
    """Run one committing child; SIGKILL it `kill_after` seconds after it is ready to commit."""
    child = subprocess.Popen([sys.executable, "-c", KILL_CHILD, str(root), str(trial), str(KILL_FILES)],
                             cwd=REPO_ROOT, stdout=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert child.stdout.readline() == b"ready\n"
    start = time.monotonic()
    if kill_after is not None:
        time.sleep(kill_after)
        child.send_signal(signal.SIGKILL)
    child.wait()
    child.stdout.close()
    assert kill_after is not None or child.returncode == 0
    return time.monotonic() - start


def test_kill_during_commit_leaves_old_or_complete_new_commit(store, tmp_path):
    repo = store.repo_dir(*K)
    put(store, {"README.md": b"card", "build/t/stale": b"old slice"})
    duration = max(run_child(store.root, n, None) for n in (0, 0))  # one whole commit, on this machine
    # kill anywhere from before the first object to well after the ref moved: a commit slowed by a
    # busy machine still leaves about a third of the kills after it (the 'new' outcome)
    window = min(2.0, max(0.3, 3 * duration))
    rng = random.Random(1234)
    outcomes = {"old": 0, "new": 0, "killed mid-commit": 0, "stale lock": 0}
    for trial in range(1, 25):
        old = store.resolve(*K, "main")
        run_child(store.root, trial, rng.uniform(0, window))
        head = store.resolve(*K, "main")
        if head == old:
            outcomes["old"] += 1
        else:
            outcomes["new"] += 1
            assert store.commit_info(*K, head)["parents"] == [old]
            listing = {e.path: e.oid for e in store.list_tree(*K, head, recursive=True) if e.type == "file"}
            assert listing == {"README.md": blob_id(b"card"), **expected_slice(trial)}
            assert store.read_file(*K, head, "build/t/f7") == (b"trial %d file 7\n" % trial) * 27
        fsck = subprocess.run(["git", "--git-dir", str(repo), "fsck", "--full", "--no-dangling"],
                              capture_output=True, text=True)
        assert fsck.returncode == 0, fsck.stdout + fsck.stderr
        assert not any(w in fsck.stdout + fsck.stderr for w in ("broken", "missing", "invalid", "error"))
        leftovers = list((store.root / ".tmp").iterdir())
        if leftovers:  # the scratch folder of a commit that was cut short
            outcomes["killed mid-commit"] += 1
            for folder in leftovers:
                shutil.rmtree(folder)
        lock = repo / "refs" / "heads" / "main.lock"
        if lock.exists():  # killed inside update-ref: the next commit must clear it once it is stale
            outcomes["stale lock"] += 1
            past = time.time() - gitstore.STALE_LOCK_S - 1
            os.utime(lock, (past, past))
    assert outcomes["old"] and outcomes["new"] and outcomes["killed mid-commit"], outcomes
    final = put(store, {"after": b"kills"})
    assert store.read_file(*K, final, "after") == b"kills"


def test_gc_collects_what_failed_publishes_left(tmp_path):
    """Issue 10, finding 8: the objects of a publish that never moved its branch, and scratch
    folders of killed processes, stayed forever; `kbuild hub gc` collects them (after a grace
    period that protects a publish in flight) and keeps everything a ref reaches."""
    import os
    import subprocess
    import sys

    from kbuild_hub.gitstore import GitStore

    store = GitStore(tmp_path / "hub")
    store.create_repo("kernel", "org/k")
    kept = store.commit("kernel", "org/k", "main", add=[FileAdd("build/a.txt", b"keep me\n")], message="v1", parent=None)
    repo = store.repo_dir("kernel", "org/k")
    blob = os.urandom(4 << 20)  # a failed publish: its blob written, its branch never moved
    orphan = subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=repo, input=blob, capture_output=True,
                            check=True).stdout.decode().strip()
    (tmp_path / "hub" / ".tmp" / "commit-killed").mkdir(parents=True)
    (tmp_path / "hub" / ".tmp" / "commit-killed" / "part").write_bytes(blob)
    gc = [sys.executable, "-m", "builder.commands.main", "hub", "gc", "--root", str(tmp_path / "hub")]
    done = subprocess.run(gc, capture_output=True, text=True)  # default grace: young, so kept
    assert done.returncode == 0, done.stderr
    assert subprocess.run(["git", "cat-file", "-e", orphan], cwd=repo).returncode == 0
    done = subprocess.run(gc + ["--grace", "0"], capture_output=True, text=True)
    assert done.returncode == 0 and "1 repo(s) collected, 1 scratch folder(s) removed" in done.stdout + done.stderr
    assert subprocess.run(["git", "cat-file", "-e", orphan], cwd=repo).returncode != 0
    assert not (tmp_path / "hub" / ".tmp" / "commit-killed").exists()
    assert store.read_file("kernel", "org/k", kept, "build/a.txt") == b"keep me\n"


def test_a_full_disk_is_named_as_such(tmp_path):
    """Issue 10, finding 8: ENOSPC read "git hash-object failed (exit 128)". A real full file
    system: a 2 MiB tmpfs (root can mount one; skipped elsewhere)."""
    import subprocess

    from kbuild_hub.errors import NoSpace
    from kbuild_hub.gitstore import GitStore

    small = tmp_path / "small"
    small.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(small)], capture_output=True, text=True)
    if done.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        store = GitStore(small / "hub")
        store.create_repo("kernel", "org/k")
        big = tmp_path / "big.bin"
        big.write_bytes(os.urandom(4 << 20))
        with pytest.raises(NoSpace, match="no space left on the device that holds the hub"):
            store.commit("kernel", "org/k", "main", add=[FileAdd("build/big.bin", big)], message="m", parent=None)
        with pytest.raises(NoSpace):  # bytes spilled to scratch first
            store.commit("kernel", "org/k", "main", add=[FileAdd("build/big.bin", os.urandom(4 << 20))], message="m",
                         parent=None)
    finally:
        subprocess.run(["umount", str(small)], check=False)
