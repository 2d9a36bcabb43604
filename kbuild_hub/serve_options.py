"""What `kbuild hub serve` runs with, resolved once before anything of the server loads: where it
listens, who may read and write (the tokens already read from their files), its limits, and the
upstream it serves in front of. builder/config/hub_service.py fills it from the flags, the
environment and the token files; `kbuild_hub.server.serve` takes it whole."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kbuild_hub.tokens import Tokens


@dataclass(frozen=True)
class Upstream:
    """The hub in front of which this one serves (`--upstream`); its token is only ever sent there."""

    url: str
    token: str | None = None
    connect_timeout: float = 5.0
    read_timeout: float = 30.0

    def __repr__(self) -> str:
        return f"Upstream({self.url!r})"


@dataclass(frozen=True)
class ServeOptions:
    root: Path  # the local hub folder
    tokens: Tokens  # the write tokens (`--token-file`, else `<root>/.token`)
    host: str = "127.0.0.1"
    port: int = 8080  # 0: any free port
    public_read: bool = True  # `--private`: reads need a token too
    trusted_orgs: frozenset[str] = frozenset()  # answered trustedKernelPublisher=true
    max_file_size: int | None = None  # any one file of an upload
    max_commit_size: int | None = None  # a commit request's whole body
    max_connections: int = 512
    max_per_client: int | None = None  # None: the server's own cap (server/connections.py)
    header_timeout: float = 10.0  # seconds a connection may take to complete its request headers
    upstream: Upstream | None = None
    # which names may come from the upstream (kbuild_hub/upstream/policy.py): local organisations
    # whose missing names may still be looked up there, and whether a repo here may shadow one there
    upstream_orgs: frozenset[str] = frozenset()
    allow_shadowing: bool = False
