"""Whose code may be imported without `trust_remote_code=True`.

Importing a kernel runs its Python in this process, so only kernels from trusted places load by
default. Trust names an organisation *on a hub*, since any server can call itself
`kernels-community`: repos of a local hub (you published them) are trusted; `kernels-community`
(which Hugging Face marks a trusted kernel publisher) only on the official Hub; and entries of
`KBUILD_TRUSTED_ORGS` or `~/.config/kbuild/trusted-orgs`, where `org` means that organisation on
the official Hub and `org@http://host:port` on that hub. Listing, checking and downloading run
nothing and need no trust; only importing does.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from .errors import UntrustedKernel
from .settings import Settings, config_file

OFFICIAL_HUB = "https://huggingface.co"


def hub_identity(endpoint: str) -> str:
    """scheme://host[:port][/path], lower-cased, without a trailing slash: how entries and
    endpoints are compared."""
    parts = urlsplit(endpoint.strip())
    return f"{parts.scheme}://{parts.netloc}{parts.path.rstrip('/')}".lower()


def trusted_on(entry: str) -> tuple[str, str]:
    """A trusted-orgs entry as (org, hub identity): `org` is on the official Hub."""
    org, _, hub = entry.partition("@")
    return org.strip(), hub_identity(hub) if hub.strip() else OFFICIAL_HUB


def check_trust(repo_id: str, endpoint: str | None, trust_remote_code, settings: Settings) -> None:
    """UntrustedKernel (a ValueError) unless `repo_id` may be imported from `endpoint` (None: a local hub).
    `trust_remote_code` is True, False, or a list of repo ids trusted in addition."""
    if trust_remote_code is True or endpoint is None:
        return
    if isinstance(trust_remote_code, (list, tuple, set, frozenset)) and repo_id in trust_remote_code:
        return
    org, hub = repo_id.split("/")[0], hub_identity(endpoint)
    if (org, hub) in {trusted_on(entry) for entry in settings.trusted_orgs}:
        return
    entry = org if hub == OFFICIAL_HUB else f"{org}@{hub}"
    raise UntrustedKernel(
        f"{repo_id}: the organisation {org!r} is not trusted on {hub}, and loading a kernel runs its code in this "
        f"process. If you trust it, pass trust_remote_code=True (or trust_remote_code=[{repo_id!r}]), or "
        f"trust the organisation on that hub with KBUILD_TRUSTED_ORGS={entry} or a line `{entry}` in {config_file()}"
    )
