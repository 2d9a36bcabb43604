"""A local hub on disk: one bare git repository per repo at `<root>/<type>s/<org>/<name>.git`.

Everything goes through git plumbing, so commit SHAs are real: `git clone` of a repo folder works
and `@<sha>` pins resolve. A commit writes every object first (blobs, tree, commit) and moves the
branch last with a compare-and-swap (`git update-ref <ref> <new> <old>`): a process killed at any
point leaves the branch at its previous commit, and two writers never lose each other's update —
the second gets RefConflict, re-reads the head and re-applies its change (see `with_retry`).
"""

from __future__ import annotations

import errno
import os
import random
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import BinaryIO, TypeVar
from urllib.parse import unquote

from kbuild.hubs.local_git import BareRepo
from kbuild_common import proc
from kbuild_common.errors import CommandError
from kbuild_common.notices import notice
from kbuild_hub import paths
from kbuild_hub.blobfiles import BlobFiles  # the server's download copies: made again when asked for
from kbuild_hub.errors import (
    EntryNotFound,
    HubError,
    HubRepoNotFound,
    HubRevisionNotFound,
    InvalidPath,
    NoSpace,
    RefConflict,
    RepoExists,
    TooLarge,
)
from kbuild_hub.paths import REPO_TYPES, InvalidRevision
from kbuild_hub.refs_reader import read_commit, read_refs, refs_stamp

__all__ = ["REPO_TYPES", "FileAdd", "GitStore", "InvalidRevision", "TreeEntry", "with_retry"]

T = TypeVar("T")

ZERO = "0" * 40  # as update-ref's old value: "the ref must not exist yet"
IDENTITY = {"GIT_AUTHOR_NAME": "kbuild", "GIT_AUTHOR_EMAIL": "kbuild@localhost",
            "GIT_COMMITTER_NAME": "kbuild", "GIT_COMMITTER_EMAIL": "kbuild@localhost"}
REPO_CONFIG = {"core.logAllRefUpdates": "true", "core.looseCompression": "1"}
STALE_LOCK_S = 10.0  # git holds a branch lock for milliseconds; an older one was left by a killed process
STALE_TMP_S = 24 * 3600
NEARLY_FULL = 1 << 20  # a git failure with less free than this is taken for ENOSPC
PARALLEL_HASH_BYTES = 32 << 20  # above this, blobs are hashed by several git processes at once
AUTO_REBASE_ATTEMPTS = 10  # for parent=None: redo the change on the new head this often


@dataclass(frozen=True)
class TreeEntry:
    path: str  # posix, relative to the repo root
    type: str  # "file" | "directory"
    size: int  # bytes for files, 0 for directories
    oid: str  # blob sha1 for files, tree sha1 for directories


@dataclass(frozen=True)
class FileAdd:
    path: str
    source: bytes | Path  # the content, or a file on disk (streamed by git, never loaded here)


def with_retry(fn: Callable[[], T], attempts: int = 5) -> T:
    """Call `fn` until it does not raise RefConflict. `fn` must re-read the branch head and redo
    its change on top of it each time (that is what makes a retry safe)."""
    for attempt in range(1, attempts + 1):
        try:
            return fn()
        except RefConflict:
            if attempt == attempts:
                raise
            time.sleep(random.uniform(0, 0.02 * 2 ** attempt))
    raise AssertionError("unreachable")


class GitStore:
    def __init__(self, root: Path, *, max_file_size: int | None = None):
        self.root = Path(root).expanduser()
        self.max_file_size = max_file_size

    # -- names ---------------------------------------------------------------------------------

    def validate_repo_id(self, repo_id: str) -> tuple[str, str]:
        return paths.validate_repo_id(repo_id)

    def validate_path(self, path: str) -> str:
        return paths.validate_path(path)

    def repo_dir(self, repo_type: str, repo_id: str) -> Path:
        org, name = paths.validate_repo_id(repo_id)
        return self.root / f"{paths.validate_repo_type(repo_type)}s" / org / f"{name}.git"

    # -- repositories --------------------------------------------------------------------------

    def exists(self, repo_type: str, repo_id: str) -> bool:
        return (self.repo_dir(repo_type, repo_id) / "HEAD").is_file()

    def create_repo(self, repo_type: str, repo_id: str, *, exist_ok: bool = False) -> bool:
        """Create the repo with `main` at an empty "initial commit"; True if created. The repo is
        built in a scratch folder and renamed into place, so a half-made repo never shows."""
        target = self.repo_dir(repo_type, repo_id)
        if not self.exists(repo_type, repo_id):
            target.parent.mkdir(parents=True, exist_ok=True)
            with self.scratch("init-") as tmp:
                bare = tmp / "repo.git"
                self._git(bare, "init", "--quiet", "--bare", "--template=")
                for key, value in REPO_CONFIG.items():
                    self._git(bare, "config", key, value)
                self._git(bare, "symbolic-ref", "HEAD", "refs/heads/main")
                empty_tree = self._text(bare, "mktree", input=b"")
                first = self._commit_tree(bare, empty_tree, [], "initial commit")
                self._git(bare, "update-ref", "refs/heads/main", first, ZERO)
                try:
                    os.rename(bare, target)
                    return True
                except OSError as e:
                    if e.errno not in (errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR):
                        raise
        if exist_ok:
            return False
        raise RepoExists(f"{repo_type} repo {repo_id} already exists in {self.root}")

    def list_repos(self, repo_type: str | None = None) -> list[tuple[str, str]]:
        found = []
        for kind in [paths.validate_repo_type(repo_type)] if repo_type else REPO_TYPES:
            for git_dir in sorted((self.root / f"{kind}s").glob("*/*.git")):
                repo_id = f"{git_dir.parent.name}/{git_dir.name[:-4]}"
                if _valid_id(repo_id) and (git_dir / "HEAD").is_file():
                    found.append((kind, repo_id))
        return found

    # -- refs ----------------------------------------------------------------------------------

    def branches(self, repo_type: str, repo_id: str) -> dict[str, str]:
        return _under(self._refs(self._repo(repo_type, repo_id)), "refs/heads/")

    def refs_stamp(self, repo_type: str, repo_id: str) -> tuple | None:
        """A cheap stamp of the repo's top-level branches and tags (refs_reader.refs_stamp): equal
        stamps, equal refs; None when too fresh to say."""
        return refs_stamp(self._repo(repo_type, repo_id))

    def tags(self, repo_type: str, repo_id: str) -> dict[str, str]:
        return _under(self._refs(self._repo(repo_type, repo_id)), "refs/tags/")

    def resolve(self, repo_type: str, repo_id: str, revision: str | None) -> str:
        """The commit SHA for a branch, tag, full SHA or `refs/heads/x` (also URL-encoded); None
        means `main`."""
        return self._resolve(self._repo(repo_type, repo_id), revision, f"{repo_type} repo {repo_id}")

    def create_branch(self, repo_type: str, repo_id: str, branch: str, start: str | None = None) -> str:
        repo = self._repo(repo_type, repo_id)
        name = paths.validate_branch(branch)
        sha = self._resolve(repo, start, f"{repo_type} repo {repo_id}")
        self._move_ref(repo, f"refs/heads/{name}", sha, ZERO, f"cannot create branch {name} in {repo_id}")
        return sha

    def delete_branch(self, repo_type: str, repo_id: str, branch: str) -> None:
        repo = self._repo(repo_type, repo_id)
        name = paths.validate_branch(branch)
        if name == "main":
            raise RefConflict(f"refusing to delete the default branch 'main' of {repo_id}")
        head = self._ref(repo, f"refs/heads/{name}")
        if head is None:
            raise HubRevisionNotFound(f"branch {name} not found in {repo_type} repo {repo_id}")
        try:
            self._git(repo, "update-ref", "-m", "kbuild: delete branch", "-d", f"refs/heads/{name}", head)
        except CommandError as e:
            raise RefConflict(f"cannot delete branch {name} of {repo_id}: {_lock_reason(e)}") from None

    # -- reading -------------------------------------------------------------------------------

    def list_tree(self, repo_type: str, repo_id: str, commit: str, path: str = "", *,
                  recursive: bool = False) -> list[TreeEntry]:
        """Entries under `path` ("" = root): direct children (folders included) or, recursive,
        every file and folder below."""
        repo = self._repo(repo_type, repo_id)
        oid = self._commit_oid(repo, commit, repo_id)
        prefix = paths.validate_path(path) if path.strip("/") else ""
        try:
            found = self._bare(repo).tree(f"{oid}:{prefix}", recursive=recursive, folders=True)
        except CommandError:
            if self._object(repo, oid, prefix or None, repo_id)[0] == "blob":
                raise EntryNotFound(f"{prefix} is a file, not a folder, at {oid[:12]} in {repo_id}") from None
            raise
        return [TreeEntry(f"{prefix}/{e.path}" if prefix else e.path, "file" if e.kind == "blob" else "directory",
                          e.size, e.oid) for e in found if e.kind in ("blob", "tree")]

    def file_info(self, repo_type: str, repo_id: str, commit: str, path: str) -> TreeEntry:
        repo = self._repo(repo_type, repo_id)
        path = paths.validate_path(path)
        kind, oid, size = self._object(repo, self._commit_oid(repo, commit, repo_id), path, repo_id)
        if kind == "tree":
            return TreeEntry(path, "directory", 0, oid)
        if kind == "blob":
            return TreeEntry(path, "file", size, oid)
        raise EntryNotFound(f"{path} in {repo_id} is a {kind}, not a file or folder")

    def files_info(self, repo_type: str, repo_id: str, commit: str, paths_: list[str]) -> list[TreeEntry]:
        """The entries of `paths_` that exist at `commit` (folders too), in one git call however
        many are asked for (paths-info)."""
        repo = self._repo(repo_type, repo_id)
        oid = self._commit_oid(repo, commit, repo_id)
        wanted = [paths.validate_path(p) for p in paths_]  # no newline can reach the batch protocol
        found = self._bare(repo).lookup([f"{oid}:{p}" for p in [""] + wanted])
        if found[0] is None:
            raise HubRevisionNotFound(f"commit {commit} not found in {repo_id}")
        out = []
        for path, hit in zip(wanted, found[1:], strict=True):
            if hit is None or hit[0] not in ("blob", "tree"):
                continue
            kind, entry_oid, size = hit
            out.append(TreeEntry(path, "file", size, entry_oid) if kind == "blob" else
                       TreeEntry(path, "directory", 0, entry_oid))
        return out

    def open_file(self, repo_type: str, repo_id: str, commit: str, path: str) -> BinaryIO:
        """A stream of the file's bytes; close it (or use `with`). Reading to the end raises
        CommandError if git failed midway."""
        repo, oid = self._blob(repo_type, repo_id, commit, path)
        return proc.open_bytes(["git", "cat-file", "blob", oid], env=self._bare(repo).env, what="git cat-file")

    def read_file(self, repo_type: str, repo_id: str, commit: str, path: str) -> bytes:
        repo, oid = self._blob(repo_type, repo_id, commit, path)
        return self._bare(repo).cat("blob", oid)

    def commit_info(self, repo_type: str, repo_id: str, commit: str) -> dict:
        """{"oid", "parents", "message", "date"} with the committer date in ISO 8601."""
        repo = self._repo(repo_type, repo_id)
        oid = self._commit_oid(repo, commit, repo_id)
        found = read_commit(repo, oid)  # in-process: the pages read one per version
        if found is None:
            raise HubRevisionNotFound(f"commit {oid} not found in {repo_type} repo {repo_id}")
        zone = timezone(timedelta(seconds=found.commit_timezone))
        return {"oid": oid, "parents": [p.decode() for p in found.parents],
                "message": found.message.decode(errors="replace").rstrip("\n"),
                "date": datetime.fromtimestamp(found.commit_time, zone).isoformat()}

    # -- writing -------------------------------------------------------------------------------

    def commit(self, repo_type: str, repo_id: str, branch: str, **kwargs) -> str:
        """One commit on `branch` (see _commit); a full disk is named as such, whichever step
        (a blob spilled to scratch, git hash-object, the ref update) ran out of space."""
        try:
            return self._commit(repo_type, repo_id, branch, **kwargs)
        except OSError as e:
            if e.errno == errno.ENOSPC:
                raise self._no_space() from None
            raise

    def _no_space(self) -> NoSpace:
        free = shutil.disk_usage(self.root).free
        return NoSpace(f"no space left on the device that holds the hub {self.root} ({free} bytes free)",
                       hint="free some space (kbuild hub gc collects what failed publishes left), then publish again")

    def _commit(self, repo_type: str, repo_id: str, branch: str, *, add: Iterable[FileAdd] = (),
                delete: Iterable[str] = (), delete_dirs: Iterable[str] = (), message: str,
                parent: str | None, create_branch_from: str | None = None) -> str:
        """One commit on `branch`; returns its SHA.

        parent=<sha>: the branch must still be at that commit (else RefConflict).
        parent=None, create_branch_from=<rev>: the branch must not exist; it is created on top of
        <rev> (RefConflict if someone created it first).
        parent=None alone: on top of whatever the head is; a concurrent move is re-applied.
        """
        repo = self._repo(repo_type, repo_id)
        name = paths.validate_branch(branch)
        ref = f"refs/heads/{name}"
        adds = {paths.validate_path(a.path): a.source for a in add}
        deletes = [paths.validate_path(p) for p in delete]
        dirs = [paths.validate_path(p) for p in delete_dirs]
        if parent is not None and not paths.is_sha(parent):
            raise InvalidRevision(f"parent {parent!r} is not a full 40-hex commit SHA")
        start = None if create_branch_from is None else self._resolve(repo, create_branch_from, repo_id)
        self._check_sources(adds)
        base, expected = _base(name, self._ref(repo, ref), parent and parent.lower(), start)
        with self.scratch("commit-") as tmp:
            blobs = self._write_blobs(repo, tmp, adds)
            for attempt in range(1, AUTO_REBASE_ATTEMPTS + 1):
                tree = self._write_tree(repo, tmp, base, blobs, deletes, dirs)
                new = self._commit_tree(repo, tree, [base], message)
                try:
                    self._move_ref(repo, ref, new, expected, f"branch {name} of {repo_id} moved")
                    return new
                except RefConflict:
                    if parent is not None or start is not None or attempt == AUTO_REBASE_ATTEMPTS:
                        raise
                    time.sleep(random.uniform(0, 0.01 * attempt))
                    base, expected = _base(name, self._ref(repo, ref), None, None)
        raise AssertionError("unreachable")

    def _check_sources(self, adds: dict[str, bytes | Path]) -> None:
        for path, source in adds.items():
            if isinstance(source, (bytes, bytearray, memoryview)):
                size = len(source)
            elif isinstance(source, os.PathLike):
                try:
                    size = Path(source).stat().st_size
                except OSError as e:
                    raise HubError(f"cannot read {source} (for {path}): {e.strerror}") from None
            else:
                raise TypeError(f"FileAdd.source for {path} must be bytes or a Path, not {type(source).__name__}")
            if self.max_file_size is not None and size > self.max_file_size:
                raise TooLarge(f"{path} is {size} bytes, over this hub's limit of {self.max_file_size} bytes")

    def _write_blobs(self, repo: Path, tmp: Path, adds: dict[str, bytes | Path]) -> dict[str, str]:
        files = []
        for i, source in enumerate(adds.values()):
            if isinstance(source, os.PathLike):
                files.append(Path(os.path.abspath(source)))
            else:
                files.append(tmp / f"blob-{i}")
                files[-1].write_bytes(source)
        total = sum(f.stat().st_size for f in files)
        jobs = max(1, min(4, os.cpu_count() or 1, len(files))) if total > PARALLEL_HASH_BYTES else 1
        chunks = [list(range(k, len(files), jobs)) for k in range(jobs)]
        with ThreadPoolExecutor(jobs) as pool:
            hashed = pool.map(lambda ids: self._hash_files(repo, [files[i] for i in ids]), chunks)
            oids = dict(pair for ids, result in zip(chunks, hashed, strict=True)
                        for pair in zip(ids, result, strict=True))
        return {path: oids[i] for i, path in enumerate(adds)}

    def _hash_files(self, repo: Path, files: list[Path]) -> list[str]:
        if not files:
            return []
        names = [str(f) for f in files]
        if any("\n" in n for n in names):  # --stdin-paths is line-based
            out = self._text(repo, "hash-object", "-w", "--no-filters", "--", *names)
        else:
            out = self._text(repo, "hash-object", "-w", "--no-filters", "--stdin-paths",
                             input="".join(n + "\n" for n in names).encode(errors="surrogateescape"))
        oids = out.split()
        if len(oids) != len(files):
            raise HubError(f"git hash-object returned {len(oids)} ids for {len(files)} files")
        return oids

    def _write_tree(self, repo: Path, tmp: Path, base: str, blobs: dict[str, str],
                    deletes: list[str], dirs: list[str]) -> str:
        entries = self._flat_tree(repo, base)
        for path in deletes:
            if entries.pop(path, None) is None:
                raise EntryNotFound(f"cannot delete {path}: no such file at {base[:12]}")
        for folder in dirs:
            for path in [p for p in entries if p.startswith(folder + "/")]:
                del entries[path]
        entries.update((path, ("100644", oid)) for path, oid in blobs.items())
        _check_file_folder_clash(entries)
        index = tmp / "index"
        index.unlink(missing_ok=True)
        info = b"".join(f"{mode} {oid}\t{path}\0".encode(errors="surrogateescape")
                        for path, (mode, oid) in entries.items())
        env = {"GIT_INDEX_FILE": str(index)}
        self._git(repo, "update-index", "-z", "--index-info", input=info, env=env)
        return self._text(repo, "write-tree", env=env)

    def _commit_tree(self, repo: Path, tree: str, parents: list[str], message: str) -> str:
        text = message if message.endswith("\n") else message + "\n"
        args = [arg for p in parents for arg in ("-p", p)]
        return self._text(repo, "commit-tree", tree, *args, "-F", "-", input=text.encode(), env=IDENTITY)

    def _move_ref(self, repo: Path, ref: str, new: str, expected: str, what: str, retry: bool = True) -> None:
        try:
            self._git(repo, "update-ref", "-m", "kbuild", ref, new, expected)
        except CommandError as e:
            if "cannot lock ref" not in e.output_tail:
                raise
            if retry and "File exists" in e.output_tail and _clear_stale_lock(repo / f"{ref}.lock"):
                return self._move_ref(repo, ref, new, expected, what, retry=False)
            raise RefConflict(f"{what}: {_lock_reason(e)}",
                              hint="read the branch head again and redo the change (gitstore.with_retry)") from None

    # -- plumbing ------------------------------------------------------------------------------

    def _repo(self, repo_type: str, repo_id: str) -> Path:
        repo = self.repo_dir(repo_type, repo_id)
        if not (repo / "HEAD").is_file():
            raise HubRepoNotFound(f"{repo_type} repo {repo_id} not found in {self.root}",
                               hint=f"create it first (kbuild hub create {repo_id})")
        return repo

    def _bare(self, repo: Path) -> BareRepo:
        """The shared reader on `repo`, running git through this store's logged runner."""
        return BareRepo(repo, runner=self._run)

    def _git(self, repo: Path, *args: str, input: bytes | None = None, env: dict[str, str] | None = None) -> bytes:
        return self._bare(repo).git(*args, input=input, env=env)

    def _run(self, argv: list[str], stdin: bytes | None, env: dict[str, str]) -> bytes:
        try:
            return proc.run_bytes(argv, input=stdin, env=env, what=f"git {argv[1]}")
        except CommandError as e:
            # git says "unable to write ... No space left on device" or only "exit 128"
            if "No space left on device" in e.output_tail or shutil.disk_usage(self.root).free < NEARLY_FULL:
                raise self._no_space() from None
            raise

    def _text(self, repo: Path, *args: str, **kwargs) -> str:
        return self._git(repo, *args, **kwargs).decode().strip()

    def _refs(self, repo: Path, *patterns: str) -> dict[str, str]:
        """Full ref name -> commit SHA (annotated tags peeled), read in-process."""
        return read_refs(repo, *patterns)

    def _ref(self, repo: Path, ref: str) -> str | None:
        return self._refs(repo, ref).get(ref)

    def _resolve(self, repo: Path, revision: str | None, where: str) -> str:
        rev = "main" if revision is None else unquote(revision) if "%" in revision else revision
        refs = self._refs(repo)
        for candidate in (rev, f"refs/heads/{rev}", f"refs/tags/{rev}"):
            if candidate.startswith("refs/") and candidate in refs:
                return refs[candidate]
        if paths.is_sha(rev):
            found = self._bare(repo).lookup([rev])[0]
            if found and found[0] == "commit":
                return rev.lower()
        raise HubRevisionNotFound(f"revision {revision or 'main'!r} not found in {where}")

    def _commit_oid(self, repo: Path, commit: str, where: str) -> str:
        return commit.lower() if paths.is_sha(commit) else self._resolve(repo, commit, where)

    def _object(self, repo: Path, commit: str, path: str | None, where: str) -> tuple[str, str, int]:
        """(type, oid, size) of `path` in `commit` (None: the root tree), in one git call."""
        found = self._bare(repo).lookup([f"{commit}^{{commit}}", f"{commit}:{path or ''}"])
        if found[0] is None:
            raise HubRevisionNotFound(f"commit {commit} not found in {where}")
        if found[1] is None:
            raise EntryNotFound(f"{path} not found at {commit[:12]} in {where}")
        return found[1]

    def _blob(self, repo_type: str, repo_id: str, commit: str, path: str) -> tuple[Path, str]:
        repo = self._repo(repo_type, repo_id)
        path = paths.validate_path(path)
        kind, oid, _ = self._object(repo, self._commit_oid(repo, commit, repo_id), path, repo_id)
        if kind != "blob":
            raise EntryNotFound(f"{path} in {repo_id} is a folder, not a file")
        return repo, oid

    def _flat_tree(self, repo: Path, commit: str) -> dict[str, tuple[str, str]]:
        return {e.path: (e.mode, e.oid) for e in self._bare(repo).tree(commit, recursive=True)}

    @contextmanager
    def scratch(self, prefix: str) -> Iterator[Path]:
        """A scratch folder under <root>/.tmp (same file system as the repos, so renames are
        atomic, and never /tmp: what a killed process leaves stays where gc finds it); leftovers
        of killed processes are swept after a day."""
        self.sweep_scratch(STALE_TMP_S)
        with tempfile.TemporaryDirectory(prefix=prefix, dir=self.root / ".tmp", ignore_cleanup_errors=True) as tmp:
            yield Path(tmp)

    def sweep_scratch(self, older_than_s: float) -> int:
        """Remove scratch folders older than `older_than_s`; how many."""
        tmp_root = self.root / ".tmp"
        tmp_root.mkdir(parents=True, exist_ok=True)
        removed = 0
        for old in tmp_root.iterdir():
            try:
                if time.time() - old.stat().st_mtime > older_than_s:
                    shutil.rmtree(old, ignore_errors=True)
                    removed += 1
            except FileNotFoundError:
                pass
        return removed

    def gc(self, grace_s: float = 3600) -> dict:
        """Collect what failed or killed publishes left: objects no ref reaches, older than
        `grace_s` (a publish in flight writes its objects before it moves the branch, so they
        must outlive it), and scratch folders as old. Returns the counts and bytes freed."""
        before = _size(self.root)
        repos = self.list_repos()
        for repo_type, repo_id in repos:
            repo = self._repo(repo_type, repo_id)
            self._git(repo, "reflog", "expire", "--expire-unreachable=now", "--all")
            self._git(repo, "gc", "--quiet", f"--prune={int(grace_s)}.seconds.ago")
        swept = self.sweep_scratch(grace_s)

        swept += BlobFiles(self.root).sweep(grace_s)
        return {"repos": len(repos), "scratch_removed": swept, "freed_bytes": max(0, before - _size(self.root))}


def _size(root: Path) -> int:
    total = 0
    for dirpath, _, filenames in os.walk(root):
        for name in filenames:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:
                pass
    return total




def _base(branch: str, head: str | None, parent: str | None, start: str | None) -> tuple[str, str]:
    """(parent of the new commit, value the branch must still have when it moves)."""
    if parent is not None:
        if head is None:
            kind = RefConflict if start is not None else HubRevisionNotFound
            raise kind(f"branch {branch} not found (expected it at {parent[:12]})")
        if head != parent:
            raise RefConflict(f"branch {branch} is at {head[:12]}, not at {parent[:12]} the commit was made for",
                              hint="read the branch head again and redo the change (gitstore.with_retry)")
        return parent, parent
    if start is not None:
        if head is not None:
            raise RefConflict(f"branch {branch} already exists (at {head[:12]})",
                              hint="read the branch head again and commit with parent=<head>")
        return start, ZERO
    if head is None:
        raise HubRevisionNotFound(f"branch {branch} not found",
                                  hint="pass create_branch_from or create the branch first")
    return head, head


def _check_file_folder_clash(entries: dict) -> None:
    folders = set()
    for path in entries:
        cut = path.find("/")
        while cut != -1:
            folders.add(path[:cut])
            cut = path.find("/", cut + 1)
    clash = sorted(folders & entries.keys())
    if clash:
        raise InvalidPath(f"{clash[0]!r} would be both a file and a folder",
                          hint="delete the file (or the folder) in the same commit")


def _clear_stale_lock(lock: Path) -> bool:
    """True if the lock is gone (vanished or removed as stale) and the update may be retried."""
    try:
        age = time.time() - lock.stat().st_mtime
    except FileNotFoundError:
        return True
    if age <= STALE_LOCK_S:
        return False
    notice(f"removing {lock}, left {age:.0f}s ago by a killed process")
    lock.unlink(missing_ok=True)
    return True


def _lock_reason(error: CommandError) -> str:
    """git's reason after "cannot lock ref 'refs/heads/x': " (e.g. "is at <a> but expected <b>")."""
    line = next((ln for ln in error.output_tail.splitlines() if "cannot lock ref '" in ln), "")
    return line.split("cannot lock ref '", 1)[1].split("': ", 1)[-1].strip() if line else error.output_tail.strip()




def _under(refs: dict[str, str], prefix: str) -> dict[str, str]:
    return {name[len(prefix):]: oid for name, oid in refs.items() if name.startswith(prefix)}




def _valid_id(repo_id: str) -> bool:
    try:
        paths.validate_repo_id(repo_id)
        return True
    except HubError:
        return False
