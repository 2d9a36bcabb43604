"""Where distributed compiles go: `--dist URL`, else `KBUILD_DIST_SCHEDULER` (`off` turns the
workspace's setting off), else the workspace build.toml's `[workspace.dist] scheduler`; the
scheduler's client token always from `KBUILD_DIST_TOKEN`. compile/sccache_dist.py runs them."""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import urlsplit

from builder.config.cascade import WorkspaceValue, resolve
from kbuild_common.errors import UsageError

ENV_SCHEDULER = "KBUILD_DIST_SCHEDULER"
ENV_TOKEN = "KBUILD_DIST_TOKEN"


@dataclass(frozen=True)
class DistSettings:
    scheduler: str  # http(s)://host:port of the sccache-dist scheduler
    origin: str  # where it was named, for messages
    token: str = field(default="", repr=False)


def parse_scheduler(text: str, origin: str, error=UsageError) -> str:
    parts = urlsplit(text.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise error(f"{origin}: expected the sccache-dist scheduler's URL (http://host:port), got {text!r}")
    return text.strip().rstrip("/")


def resolve_dist(flag: str | None, env_scheduler: str | None, env_token: str | None,
                 workspace: WorkspaceValue) -> DistSettings | None:
    """--dist URL, else KBUILD_DIST_SCHEDULER (`off`: none), else [workspace.dist] scheduler (read
    through `workspace` only then); None: compile here."""
    found = resolve(flag=("--dist", flag), env=(ENV_SCHEDULER, env_scheduler), parse=parse_scheduler,
                    toml=lambda: workspace("dist", "scheduler", hint=f"; the token comes from {ENV_TOKEN}"),
                    can_turn_off=True)
    if found is None or found.value is None:
        return None
    if not env_token:
        raise UsageError(f"{ENV_TOKEN} is not set: distributed compiles ({found.origin}) need the scheduler's client "
                         "token", hint=f"export {ENV_TOKEN}=<the token of the scheduler's [client_auth]>")
    return DistSettings(found.value, found.origin, env_token)
