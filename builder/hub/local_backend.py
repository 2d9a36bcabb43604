"""Publishing into a local hub: the git folder is written directly, one commit per publish."""

from __future__ import annotations

from pathlib import Path

from builder.hub.backend import REPO_TYPE, RemoteFile, Upload
from kbuild_hub.errors import EntryNotFound
from kbuild_hub.gitstore import FileAdd, GitStore


class LocalHubBackend:
    """The publisher's HubBackend for a local git hub (the runtime reads one with kbuild.hubs.local_git.LocalGitHub)."""

    def __init__(self, root: Path):
        self.store = GitStore(root)

    def describe(self) -> str:
        return f"local hub {self.store.root}"

    def ensure_repo(self, repo_id: str) -> None:
        self.store.create_repo(REPO_TYPE, repo_id, exist_ok=True)

    def head(self, repo_id: str, branch: str) -> str | None:
        return self.store.branches(REPO_TYPE, repo_id).get(branch)

    def files(self, repo_id: str, commit: str, prefix: str) -> dict[str, RemoteFile]:
        try:
            entries = self.store.list_tree(REPO_TYPE, repo_id, commit, prefix, recursive=True)
        except EntryNotFound:
            return {}
        return {e.path: RemoteFile(e.path, e.oid, e.size) for e in entries if e.type == "file"}

    def read(self, repo_id: str, commit: str, path: str) -> bytes:
        return self.store.read_file(REPO_TYPE, repo_id, commit, path)

    def commit(self, repo_id: str, branch: str, *, uploads: list[Upload], deletes: list[str], message: str,
               parent: str | None) -> str:
        start = None if parent else self.store.resolve(REPO_TYPE, repo_id, "main")
        return self.store.commit(REPO_TYPE, repo_id, branch, add=[FileAdd(u.path, u.source) for u in uploads],
                                 delete=deletes, message=message, parent=parent, create_branch_from=start)

    def url(self, repo_id: str, revision: str) -> str:
        return f"{self.store.repo_dir(REPO_TYPE, repo_id).as_uri()}@{revision}"
