"""Whose code may be imported without `trust_remote_code=True`.

Importing a kernel runs its Python in this process, so only kernels from trusted places load by
default: repos of a local hub (you published them), organisations listed in
`KBUILD_TRUSTED_ORGS` or `~/.config/kbuild/trusted-orgs`, and `kernels-community` (which Hugging
Face marks a trusted kernel publisher). Listing, checking and downloading run nothing and need
no trust; only importing does.
"""

from __future__ import annotations

from .settings import Settings, config_file


def check_trust(repo_id: str, hub_is_local: bool, trust_remote_code, settings: Settings) -> None:
    """ValueError unless `repo_id` may be imported. `trust_remote_code` is True, False, or a list
    of repo ids trusted in addition to the trusted organisations."""
    if trust_remote_code is True or hub_is_local:
        return
    if isinstance(trust_remote_code, (list, tuple, set, frozenset)) and repo_id in trust_remote_code:
        return
    org = repo_id.split("/")[0]
    if org in settings.trusted_orgs:
        return
    raise ValueError(
        f"{repo_id}: the organisation {org!r} is not trusted, and loading a kernel runs its code in this "
        f"process. If you trust it, pass trust_remote_code=True (or trust_remote_code=[{repo_id!r}]), or "
        f"trust the organisation with KBUILD_TRUSTED_ORGS={org} or a line `{org}` in {config_file()}"
    )
