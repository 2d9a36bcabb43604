"""Read a local git hub: `<root>/kernels/<org>/<name>.git` (or `models/…`), bare repos whose
`v<N>` branches hold `build/<variant>/**`. Each repo is read through `git_repo.BareRepo`, the one
local-git reader (the builder's hub store reads with it too).
"""

from __future__ import annotations

from pathlib import Path

from .git_repo import BareRepo, GitFailed
from .hubs import HubUnreachable, RemoteFile, RepoNotFound, cache_key, safe_relpath, skip_bytecode
from .refs import Refs, UnknownRevision

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

    def repo(self, repo_id: str) -> BareRepo:
        return BareRepo(self.repo_dir(repo_id))

    def refs(self, repo_id: str) -> Refs:
        refs = self.repo(repo_id).refs()
        return Refs(_under(refs, "refs/heads/"), _under(refs, "refs/tags/"))

    def variants(self, repo_id: str, commit: str) -> list[str]:
        repo = self._checked(repo_id, commit)
        return sorted(e.path.removeprefix("build/") for e in repo.tree(commit, "build/") if e.kind == "tree")

    def fetch(self, repo_id: str, commit: str, variant: str, dest: Path) -> list[RemoteFile]:
        files = self.files(repo_id, commit, variant)
        blobs = self.repo(repo_id).blobs([f.oid for f in files])
        dest = Path(dest)
        for f in files:
            target = dest / f.path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(blobs[f.oid])
            if f.executable:
                target.chmod(0o755)
        return files

    def read_file(self, repo_id: str, commit: str, path: str) -> bytes:
        repo = self._checked(repo_id, commit)
        try:
            return repo.cat("blob", f"{commit}:{safe_relpath(path, repo_id)}")
        except GitFailed:
            raise FileNotFoundError(f"{repo_id}@{commit[:12]} has no file {path}") from None

    def files(self, repo_id: str, commit: str, variant: str) -> list[RemoteFile]:
        prefix = f"build/{variant}/"
        files = []
        for entry in self.repo(repo_id).tree(commit, prefix, recursive=True):
            rel = safe_relpath(entry.path.removeprefix(prefix), f"{repo_id}@{commit[:12]}")
            if entry.kind != "blob" or entry.mode == "120000":
                raise ValueError(f"{repo_id}@{commit[:12]}: {entry.path} is a "
                                 f"{'link' if entry.kind == 'blob' else entry.kind}; a published variant holds only plain files")
            if not skip_bytecode(rel):
                files.append(RemoteFile(rel, entry.oid, entry.size, entry.mode == "100755"))
        if not files:
            raise FileNotFoundError(f"{repo_id}@{commit[:12]} has no files under {prefix}")
        return files

    def _checked(self, repo_id: str, commit: str) -> BareRepo:
        repo = self.repo(repo_id)
        if repo.lookup([f"{commit}^{{commit}}"])[0] is None:
            raise UnknownRevision(f"{repo_id} has no commit {commit} on {self.describe()}")
        return repo


def _under(refs: dict[str, str], prefix: str) -> dict[str, str]:
    return {name.removeprefix(prefix): oid for name, oid in refs.items() if name.startswith(prefix)}
