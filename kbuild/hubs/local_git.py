"""Read a local git hub: `<root>/kernels/<org>/<name>.git` (or `models/…`), bare repos whose
`v<N>` branches hold `build/<variant>/**` (and `signatures/<variant>/`: kbuild/repo_layout.py).

`BareRepo` is the one local-git reader of kbuild: `LocalGitHub` reads published kernels with it,
and the hub service's store (`kbuild_hub/gitstore.py`) reads with it too and adds its writes on
top, through the same pinned environment. Who runs git is pluggable (`runner`): the runtime runs
it here, the builder through its logged subprocess helper.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..budget import variant_budget
from ..digest import is_bytecode
from ..errors import BadHubContent, GitFailed, HubUnreachable, KernelNotFound, RepoNotFound, RevisionNotFound
from ..refs import Refs
from ..repo_layout import BUILD_PREFIX, listed_variants, ssh_signature, variant_folder, variant_paths, variant_prefix
from .base import RemoteFile, cache_folder_name, safe_relpath

TIMEOUT = 60
_TYPES = ("kernels", "models")

# (argv, stdin, environment additions) -> stdout; raises on a non-zero exit
Runner = Callable[[list[str], "bytes | None", dict[str, str]], bytes]


class LocalGitHub:
    """A local git hub, read through `BareRepo`: no network, no server."""

    local = True
    endpoint = None  # nothing remote: a local hub's kernels need no trust (kbuild/trust.py)

    def __init__(self, root: Path):
        self.root = Path(root).expanduser().absolute()
        self.key = cache_folder_name("local", str(self.root))

    def describe(self) -> str:
        return f"local hub {self.root}"

    def repo_dir(self, repo_id: str) -> Path:
        if not self.root.is_dir():
            raise HubUnreachable(f"local hub {self.root} does not exist (publish to it with `kbuild publish --hub "
                                 f"{self.root}`, or pass hub= / set KBUILD_HUB or HF_ENDPOINT for another hub)")
        org, name = repo_id.split("/")
        for kind in _TYPES:
            path = self.root / kind / org / f"{name}.git"
            if path.is_dir():
                return path
        raise RepoNotFound(f"no kernel repo {repo_id} on {self.describe()} (looked for kernels/{org}/{name}.git)")

    def repo(self, repo_id: str) -> BareRepo:
        return BareRepo(self.repo_dir(repo_id))

    def refs(self, repo_id: str) -> Refs:
        refs = self.repo(repo_id).refs()
        return Refs(_under(refs, "refs/heads/"), _under(refs, "refs/tags/"))

    def variants(self, repo_id: str, commit: str) -> list[str]:
        repo = self._checked(repo_id, commit)
        return listed_variants(e.path for e in repo.tree(commit, BUILD_PREFIX) if e.kind == "tree")

    def fetch(self, repo_id: str, commit: str, variant: str, dest: Path,
              max_bytes: int | None = None) -> list[RemoteFile]:
        files = self.files(repo_id, commit, variant)
        budget = variant_budget((f.size for f in files), max_bytes,
                                f"{self.describe()}: {repo_id}@{commit[:12]} {variant_folder(variant)}")
        blobs = self.repo(repo_id).blobs([f.oid for f in files])
        dest = Path(dest)
        for f in files:
            target = dest / f.path
            target.parent.mkdir(parents=True, exist_ok=True)
            budget.take(len(blobs[f.oid]))
            target.write_bytes(blobs[f.oid])
            if f.executable:
                target.chmod(0o755)
        return files

    def read_file(self, repo_id: str, commit: str, path: str) -> bytes:
        repo = self._checked(repo_id, commit)
        try:
            return repo.cat("blob", f"{commit}:{safe_relpath(path, repo_id)}")
        except GitFailed:
            raise KernelNotFound(f"{repo_id}@{commit[:12]} has no file {path}") from None

    def files(self, repo_id: str, commit: str, variant: str) -> list[RemoteFile]:
        prefix = variant_prefix(variant)
        listed = self.repo(repo_id).tree(commit, prefix, ssh_signature(variant), recursive=True)
        entries = {e.path: e for e in listed}
        files = []
        for path, rel in variant_paths(variant, entries).items():
            entry = entries[path]
            rel = safe_relpath(rel, f"{repo_id}@{commit[:12]}")
            if entry.kind != "blob" or entry.mode == "120000":
                raise BadHubContent(f"{repo_id}@{commit[:12]}: {entry.path} is a "
                                    f"{'link' if entry.kind == 'blob' else entry.kind}; a published variant holds "
                                    "only plain files")
            if not is_bytecode(rel):
                files.append(RemoteFile(rel, entry.oid, entry.size, entry.mode == "100755", repo_path=path))
        if not any(f.repo_path.startswith(prefix) for f in files):
            raise KernelNotFound(f"{repo_id}@{commit[:12]} has no files under {prefix}")
        return files

    def _checked(self, repo_id: str, commit: str) -> BareRepo:
        repo = self.repo(repo_id)
        if repo.lookup([f"{commit}^{{commit}}"])[0] is None:
            raise RevisionNotFound(f"{repo_id} has no commit {commit} on {self.describe()}")
        return repo


def _under(refs: dict[str, str], prefix: str) -> dict[str, str]:
    return {name.removeprefix(prefix): oid for name, oid in refs.items() if name.startswith(prefix)}


# -- one bare repository, read with the git CLI ----------------------------------------------------

@dataclass(frozen=True)
class TreeEntry:
    path: str  # relative to the tree listed, or the full path when listed by path
    kind: str  # "blob", "tree" or "commit" (a submodule)
    oid: str
    mode: str
    size: int  # 0 for trees


def run_git(argv: list[str], stdin: bytes | None, env: dict[str, str]) -> bytes:
    """The runtime's runner: git with a timeout; a missing git or a hang is an unreachable hub."""
    try:
        done = subprocess.run(argv, input=stdin, capture_output=True, timeout=TIMEOUT, env={**os.environ, **env})
    except FileNotFoundError:
        raise HubUnreachable("reading a local hub needs the git command, which is not on PATH") from None
    except subprocess.TimeoutExpired:
        raise HubUnreachable(f"git timed out after {TIMEOUT}s: {' '.join(argv)}") from None
    if done.returncode != 0:
        raise GitFailed(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.decode(errors='replace')[-500:]}")
    return done.stdout

class BareRepo:
    def __init__(self, path: Path, runner: Runner = run_git):
        self.path = Path(path)
        self._runner = runner

    @property
    def env(self) -> dict[str, str]:
        """Pin git to this repository and to git's own defaults, whatever GIT_* variables, system
        config, pager or locale the caller's environment carries (they change what git prints)."""
        return {"GIT_DIR": str(self.path), "GIT_OBJECT_DIRECTORY": str(self.path / "objects"),
                "GIT_ALTERNATE_OBJECT_DIRECTORIES": "", "GIT_NAMESPACE": "", "GIT_CONFIG_NOSYSTEM": "1",
                "GIT_TERMINAL_PROMPT": "0", "GIT_PAGER": "cat", "LC_ALL": "C"}

    def git(self, *args: str, input: bytes | None = None, env: dict[str, str] | None = None) -> bytes:
        return self._runner(["git", *args], input, {**self.env, **(env or {})})

    def refs(self, *patterns: str) -> dict[str, str]:
        """Full ref name -> commit SHA, annotated tags peeled to their commit."""
        out = self.git("for-each-ref", "--format=%(refname)%00%(objectname)%00%(*objectname)",
                       *(patterns or ("refs/heads", "refs/tags"))).decode()
        refs = {}
        for line in out.splitlines():
            name, oid, peeled = line.split("\0")
            refs[name] = peeled or oid
        return refs

    def lookup(self, names: list[str]) -> list[tuple[str, str, int] | None]:
        """(type, oid, size) of each object name (`<commit>^{commit}`, `<commit>:<path>`, an oid),
        None where there is none: one `git cat-file --batch-check` for all of them."""
        query = "".join(f"{n}\n" for n in names).encode(errors="surrogateescape")
        lines = self.git("cat-file", "--batch-check", input=query).decode(errors="surrogateescape").split("\n")
        return [_batch_line(line) for line in lines[:len(names)]]

    def tree(self, treeish: str, *paths: str, recursive: bool = False, folders: bool = False) -> list[TreeEntry]:
        """`git ls-tree -l` of `treeish` (limited to `paths`): direct children, or with `recursive`
        every file below (and every folder too with `folders`)."""
        flags = ["-r", *(["-t"] if folders else [])] if recursive else []
        out = self.git("ls-tree", "-l", "-z", *flags, treeish, *(["--", *paths] if paths else []))
        entries = []
        for record in filter(None, out.split(b"\0")):
            meta, name = record.split(b"\t", 1)
            mode, kind, oid, size = meta.decode().split()
            entries.append(TreeEntry(name.decode(errors="surrogateescape"), kind, oid, mode,
                                     int(size) if size.isdigit() else 0))
        return entries

    def blobs(self, oids: list[str]) -> dict[str, bytes]:
        """Every blob's bytes, in one `git cat-file --batch`."""
        out = self.git("cat-file", "--batch", input="".join(o + "\n" for o in oids).encode())
        blobs, pos = {}, 0
        for oid in oids:
            header_end = out.index(b"\n", pos)
            got, kind, size = out[pos:header_end].decode().split(" ")
            if got != oid or kind != "blob":
                raise BadHubContent(f"{self.path}: git returned {kind} {got} for blob {oid}")
            start = header_end + 1
            blobs[oid] = out[start:start + int(size)]
            pos = start + int(size) + 1  # the newline after each object
        return blobs

    def cat(self, kind: str, name: str) -> bytes:
        """One object's content (`blob`, `commit`) by oid or `<commit>:<path>`."""
        return self.git("cat-file", kind, name)


def _batch_line(line: str) -> tuple[str, str, int] | None:
    parts = line.split(" ")
    if len(parts) == 3 and len(parts[0]) in (40, 64) and parts[2].isdigit():
        return parts[1], parts[0], int(parts[2])
    return None  # "<name> missing" (or ambiguous)
