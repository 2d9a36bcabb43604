"""The interface every hub reader implements, and what both readers share: the file record, the
hub address and its parser, the cache folder name of a hub, the path rules.

Imports no reader: `kbuild.hubs.open` picks one, and each reader imports this module.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Protocol
from urllib.parse import unquote, urlparse

from ..errors import BadHubContent, InvalidRequest
from ..refs import Refs
from ..settings import DEFAULT_LOCAL_HUB


@dataclass(frozen=True)
class RemoteFile:
    path: str  # relative to the variant folder
    oid: str  # git blob id (of the LFS pointer for an LFS file)
    size: int
    executable: bool = False
    lfs_sha256: str | None = None  # hex sha256 of the content, for LFS files
    repo_path: str = ""  # where it is in the repo (kbuild/repo_layout.py: not always build/<variant>/<path>)


class HubReader(Protocol):
    key: str  # names this hub's part of the cache (cache_folder_name)
    local: bool  # True when reading makes no network request

    @property
    def endpoint(self) -> str | None:
        """An HTTP hub's URL, which the trust check names; None for a local hub."""

    def describe(self) -> str: ...

    def refs(self, repo_id: str) -> Refs:
        """Branches and tags; RepoNotFound, HubUnreachable."""

    def variants(self, repo_id: str, commit: str) -> list[str]:
        """The folder names under `build/` at `commit` ([] when there is no build/)."""

    def files(self, repo_id: str, commit: str, variant: str) -> list[RemoteFile]:
        """The files of `build/<variant>/` (bytecode skipped) and its SSH signature
        (kbuild/repo_layout.py), with sizes; nothing is downloaded."""

    def fetch(self, repo_id: str, commit: str, variant: str, dest: Path,
              max_bytes: int | None = None) -> list[RemoteFile]:
        """Write the variant's files (`files`) into `dest`, each at its path in the variant
        folder; the files written. At most
        the listing's total (kbuild.budget), and VariantTooLarge before anything is written when
        the listing claims more than `max_bytes`."""

    def read_file(self, repo_id: str, commit: str, path: str) -> bytes:
        """One small file's bytes (a variant's metadata.json, for lock files); KernelNotFound when
        there is no such file."""


@dataclass(frozen=True)
class HubAddress:
    """Where a hub is: a local git hub's folder, or an HTTP endpoint (neither: the default local
    hub, as parse_hub_address(None) says)."""

    local: Path | None = None
    endpoint: str | None = None

    @property
    def folder(self) -> Path:
        """The local hub's folder (for an address without an endpoint)."""
        return self.local or DEFAULT_LOCAL_HUB

    def __str__(self) -> str:
        return self.endpoint if self.endpoint else str(self.folder)


def parse_hub_address(value: str | Path | None) -> HubAddress:
    """A folder or file:// URL is a local hub, http(s):// an HTTP one; None or "" the default
    local hub (~/.cache/kbuild/hub). The one parser of hub addresses: `kbuild publish/lock --hub`
    use it too. InvalidRequest (a ValueError) for anything else."""
    if not value:
        return HubAddress(local=DEFAULT_LOCAL_HUB)
    value = str(value)
    parsed = urlparse(value)
    scheme = parsed.scheme.lower()
    if scheme in ("http", "https"):
        if not parsed.netloc:
            raise InvalidRequest(f"hub {value!r} has no host (expected e.g. http://127.0.0.1:8000)")
        return HubAddress(endpoint=value.rstrip("/"))
    if scheme == "file":
        return HubAddress(local=Path(unquote(parsed.path)))
    if len(scheme) > 1:  # one letter: a Windows drive, i.e. a folder
        raise InvalidRequest(f"unsupported hub address {value!r} (expected a folder, file://, http:// or https://)")
    return HubAddress(local=Path(value).expanduser())


def cache_folder_name(kind: str, where: str) -> str:
    """The download cache's folder for a hub: readable and collision-free, `huggingface.co`,
    `127.0.0.1_8000-http`, `local-<hash>`."""
    if kind == "local":
        return "local-" + hashlib.sha256(where.encode()).hexdigest()[:16]
    scheme, _, rest = where.partition("://")
    name = re.sub(r"[^A-Za-z0-9._-]", "_", rest.rstrip("/"))
    return name if scheme.lower() == "https" else f"{name}-{scheme.lower()}"


def safe_relpath(path: str, what: str) -> str:
    """A repo path that stays inside its folder: relative, no `..`, no backslash or NUL."""
    parts = PurePosixPath(path).parts
    if (not path or path.startswith("/") or "\\" in path or "\0" in path or ".." in parts
            or any(p in ("", ".") for p in path.split("/"))):
        raise BadHubContent(f"{what}: refusing the path {path!r}, which could escape the cache folder")
    return path
