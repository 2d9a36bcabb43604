"""The shared compile cache: ccache's remote storage, so a second machine (a CI runner, a
colleague's checkout) gets the objects a first one compiled.

Named by `KBUILD_REMOTE_CACHE` (wins; `off` turns a workspace's setting off), else by the workspace
build.toml's `[workspace.cache] remote`. ccache does the work: each compile looks in the local cache,
then the remote one, and writes what it compiled to both; an unreachable server only costs the hits
(the build compiles locally and says so once).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import urlsplit

from builder.config.cascade import WorkspaceValue, resolve, value
from kbuild_common.errors import UsageError

ENV = "KBUILD_REMOTE_CACHE"
# the storage kinds ccache's remote storage speaks (its `--version` lists them as *-storage)
SCHEMES = ("redis", "redis+unix", "http", "file")


@dataclass(frozen=True)
class RemoteCache:
    url: str = field(repr=False)  # as ccache's remote_storage takes it (attributes after `|` included)
    origin: str  # where it was named, for messages

    def shown(self) -> str:
        """The URL without its password (messages and logs never carry it)."""
        base, _, attrs = self.url.partition("|")
        parts = urlsplit(base)
        if parts.password is None:
            return self.url
        host = parts.netloc.rpartition("@")[2]
        user = f"{parts.username}:" if parts.username else ":"
        return parts._replace(netloc=f"{user}***@{host}").geturl() + (f"|{attrs}" if attrs else "")


def parse_remote(text: str, origin: str, error=UsageError) -> RemoteCache:
    base = text.strip().partition("|")[0]
    scheme = urlsplit(base).scheme
    if scheme not in SCHEMES or not base.removeprefix(f"{scheme}://"):
        raise error(f"{origin}: expected a remote cache URL ({', '.join(s + '://…' for s in SCHEMES)}), "
                    f"got {text!r}")
    return RemoteCache(text.strip(), origin)


def resolve_remote(env_value: str | None, workspace: WorkspaceValue) -> RemoteCache | None:
    """KBUILD_REMOTE_CACHE (`off`: none), else the workspace's [workspace.cache] remote (read through
    `workspace` only then), else None."""
    return value(resolve(env=(ENV, env_value), toml=lambda: workspace("cache", "remote"),
                         parse=parse_remote, can_turn_off=True))
