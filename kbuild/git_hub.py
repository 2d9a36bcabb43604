"""Read a local git hub: `<root>/kernels/<org>/<name>.git` (or `models/…`), bare repos whose
`v<N>` branches hold `build/<variant>/**`. Read with the git CLI, which is all this needs; this
module owns the runtime's subprocesses.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from .hubs import HubUnreachable, RemoteFile, RepoNotFound, cache_key, safe_relpath, skip_bytecode
from .refs import Refs, UnknownRevision

TIMEOUT = 60
_TYPES = ("kernels", "models")


class GitHub:
    local = True

    def __init__(self, root: Path):
        self.root = Path(root).expanduser().absolute()
        self.key = cache_key("local", str(self.root))

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

    def refs(self, repo_id: str) -> Refs:
        out = self._git(repo_id, "for-each-ref", "--format=%(refname) %(objectname) %(*objectname)",
                        "refs/heads", "refs/tags")
        branches, tags = {}, {}
        for line in out.decode().splitlines():
            name, sha, *peeled = line.split(" ")
            if name.startswith("refs/heads/"):
                branches[name.removeprefix("refs/heads/")] = sha
            elif name.startswith("refs/tags/"):  # an annotated tag names its commit through %(*objectname)
                tags[name.removeprefix("refs/tags/")] = peeled[0] if peeled and peeled[0] else sha
        return Refs(branches, tags)

    def variants(self, repo_id: str, commit: str) -> list[str]:
        self._check_commit(repo_id, commit)
        out = self._git(repo_id, "ls-tree", "-z", commit, "build/")
        names = []
        for entry in filter(None, out.split(b"\0")):
            meta, _, path = entry.decode().partition("\t")
            if meta.split(" ")[1] == "tree":
                names.append(path.removeprefix("build/"))
        return sorted(names)

    def fetch(self, repo_id: str, commit: str, variant: str, dest: Path) -> list[RemoteFile]:
        files = self.files(repo_id, commit, variant)
        blobs = self._cat(repo_id, [f.oid for f in files])
        dest = Path(dest)
        for f in files:
            target = dest / f.path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(blobs[f.oid])
            if f.executable:
                target.chmod(0o755)
        return files

    def read_file(self, repo_id: str, commit: str, path: str) -> bytes:
        self._check_commit(repo_id, commit)
        try:
            return self._git(repo_id, "cat-file", "blob", f"{commit}:{safe_relpath(path, repo_id)}")
        except _GitFailed:
            raise FileNotFoundError(f"{repo_id}@{commit[:12]} has no file {path}") from None

    def files(self, repo_id: str, commit: str, variant: str) -> list[RemoteFile]:
        prefix = f"build/{variant}/"
        out = self._git(repo_id, "ls-tree", "-r", "-l", "-z", commit, prefix)
        files = []
        for entry in filter(None, out.split(b"\0")):
            meta, _, path = entry.decode().partition("\t")
            mode, kind, oid, size = meta.split()
            rel = safe_relpath(path.removeprefix(prefix), f"{repo_id}@{commit[:12]}")
            if kind != "blob" or mode == "120000":
                raise ValueError(f"{repo_id}@{commit[:12]}: {path} is a {'link' if kind == 'blob' else kind}; "
                                 "a published variant holds only plain files")
            if not skip_bytecode(rel):
                files.append(RemoteFile(rel, oid, int(size), mode == "100755"))
        if not files:
            raise FileNotFoundError(f"{repo_id}@{commit[:12]} has no files under {prefix}")
        return files

    def _cat(self, repo_id: str, oids: list[str]) -> dict[str, bytes]:
        """Every blob in one `git cat-file --batch` process."""
        out = self._git(repo_id, "cat-file", "--batch", stdin="".join(o + "\n" for o in oids).encode())
        blobs, pos = {}, 0
        for oid in oids:
            header_end = out.index(b"\n", pos)
            got, kind, size = out[pos:header_end].decode().split(" ")
            if got != oid or kind != "blob":
                raise ValueError(f"{repo_id}: git returned {kind} {got} for blob {oid}")
            start = header_end + 1
            blobs[oid] = out[start:start + int(size)]
            pos = start + int(size) + 1  # the newline after each object
        return blobs

    def _check_commit(self, repo_id: str, commit: str) -> None:
        try:
            self._git(repo_id, "cat-file", "-e", f"{commit}^{{commit}}")
        except _GitFailed:
            raise UnknownRevision(f"{repo_id} has no commit {commit} on {self.describe()}") from None

    def _git(self, repo_id: str, *args: str, stdin: bytes | None = None) -> bytes:
        git_dir = self.repo_dir(repo_id)
        cmd = ["git", f"--git-dir={git_dir}", *args]
        # Only git's own settings: no user config, pager or terminal prompts change what it prints.
        env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0", "GIT_PAGER": "cat",
               "LC_ALL": "C"}
        try:
            done = subprocess.run(cmd, input=stdin, capture_output=True, timeout=TIMEOUT, env=env)
        except FileNotFoundError:
            raise HubUnreachable("reading a local hub needs the git command, which is not on PATH") from None
        except subprocess.TimeoutExpired:
            raise HubUnreachable(f"git timed out after {TIMEOUT}s: {' '.join(cmd)}") from None
        if done.returncode != 0:
            raise _GitFailed(f"{' '.join(cmd)} failed ({done.returncode}): {done.stderr.decode(errors='replace')[-500:]}")
        return done.stdout


class _GitFailed(RuntimeError):
    pass
