"""What `kbuild publish` needs from a hub, whichever kind it is: a local git folder or an HTTP
endpoint speaking the Hugging Face Hub API. Both implement this one small interface."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

REPO_TYPE = "kernel"


@dataclass(frozen=True)
class RemoteFile:
    path: str
    oid: str  # git blob id (what both hubs report for regular files)
    size: int


@dataclass(frozen=True)
class Upload:
    path: str  # path in the repo
    source: Path


class HubBackend(Protocol):
    def describe(self) -> str: ...

    def ensure_repo(self, repo_id: str) -> None:
        """Create the repo (type kernel) when it does not exist."""

    def head(self, repo_id: str, branch: str) -> str | None:
        """The branch's commit, None when the branch does not exist."""

    def files(self, repo_id: str, commit: str, prefix: str) -> dict[str, RemoteFile]:
        """Every file under `prefix` at `commit` (empty when the folder does not exist)."""

    def read(self, repo_id: str, commit: str, path: str) -> bytes:
        """One file's bytes at `commit`."""

    def commit(self, repo_id: str, branch: str, *, uploads: list[Upload], deletes: list[str], message: str,
               parent: str | None) -> str:
        """One commit; RefConflict when the branch head is no longer `parent`. A missing branch is
        created from `main`."""

    def url(self, repo_id: str, revision: str) -> str: ...
