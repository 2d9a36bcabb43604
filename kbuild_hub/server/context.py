"""What every handler gets: the server's resolved options, the store, and the request as plain data."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from kbuild_hub.blobfiles import BlobFiles
from kbuild_hub.errors import HubRepoNotFound
from kbuild_hub.server.routing import URL_PREFIXES
from kbuild_hub.tokens import Tokens
from kbuild_hub.upstream.policy import UpstreamPolicy


@dataclass(frozen=True)
class ServerConfig:
    root: Path
    tokens: Tokens
    public_read: bool = True
    max_file_size: int | None = None  # any one file of an upload
    max_commit_size: int | None = None  # a commit request's whole body (its files base64-encoded)
    trusted_orgs: frozenset[str] = frozenset()
    upstream_policy: UpstreamPolicy = UpstreamPolicy()


@dataclass(frozen=True)
class Call:
    """One request, as the handlers see it (they run in worker threads, away from the event loop)."""

    method: str
    params: Mapping[str, str]
    query: Mapping[str, str]
    base_url: str  # scheme://host[:port] as the client addressed us: URLs we return must match it
    body: Any = None  # parsed JSON, a form (name → list of values), a spooled file, or None

    @property
    def repo_type(self) -> str:
        return self.params["repo_type"]

    @property
    def repo_id(self) -> str:
        return f"{self.params['ns']}/{self.params['name']}"

    def flag(self, name: str) -> bool:
        return str(self.query.get(name, "")).lower() in ("1", "true", "yes")


@dataclass
class Hub:
    config: ServerConfig
    store: Any  # gitstore.GitStore
    upstream: Any = None  # upstream.cache.UpstreamCache: the upstream's repos, when one is configured or cached
    _locks: dict[tuple[str, str], threading.Lock] = field(default_factory=dict)
    _guard: threading.Lock = field(default_factory=threading.Lock)
    blobs: BlobFiles = field(init=False)  # what downloads read: plain-file copies of the blobs

    def __post_init__(self) -> None:
        self.blobs = BlobFiles(self.config.root)

    def repo_lock(self, repo_type: str, repo_id: str) -> threading.Lock:
        """Writes to one repo go one at a time, so parallel uploads to one branch queue instead of
        failing their compare-and-swap."""
        with self._guard:
            return self._locks.setdefault((repo_type, repo_id), threading.Lock())

    def require_repo(self, call: Call) -> tuple[str, str]:
        repo_type, repo_id = call.repo_type, call.repo_id
        self.store.validate_repo_id(repo_id)
        if not self.store.exists(repo_type, repo_id):
            raise HubRepoNotFound(f"{repo_type} repository {repo_id} not found",
                               hint="create it with HfApi.create_repo or `kbuild publish`")
        return repo_type, repo_id


def repo_url(base_url: str, repo_type: str, repo_id: str) -> str:
    return f"{base_url}/{URL_PREFIXES[repo_type]}{repo_id}"


def iso_date(value: Any) -> str | None:
    """A commit date as the Hub writes it (`2024-05-01T12:00:00.000Z`), from an epoch number or
    an ISO string."""
    if value is None:
        return None
    if isinstance(value, (int, float)):
        moment = datetime.fromtimestamp(value, tz=timezone.utc)
    else:
        try:
            moment = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        except ValueError:
            return str(value)
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
