"""Where kernels come from: a local git hub (a folder of bare repos, `local_git.LocalGitHub`) or
an HTTP hub (the Hugging Face Hub or `kbuild hub serve`, `http.HttpHubReader`). Both implement
`base.HubReader`; `open(address)` picks one. Readers load on first use: the HTTP one imports
huggingface_hub, and `import kbuild` stays light. huggingface_hub is kbuild's `hub` extra (a plain
`pip install kbuild` reads local hubs only): without it, an HTTP hub is a one-line HubClientMissing.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from ..errors import HubClientMissing
from .base import HubAddress, HubReader, RemoteFile, cache_folder_name, parse_hub_address, safe_relpath

__all__ = ["HubAddress", "HubReader", "RemoteFile", "cache_folder_name", "open", "parse_hub_address",
           "safe_relpath"]


def open(hub: str | Path | None, token: str | None = None) -> HubReader:  # noqa: A001 - hubs.open(address)
    """The reader for hub address `hub` (parse_hub_address: a folder, file://, http(s)://, or None
    for the default local hub)."""
    address = parse_hub_address(hub)
    if address.endpoint:
        _require_hub_client(address.endpoint)
        from .http import HttpHubReader  # noqa: PLC0415 - cost: concurrent.futures and logging, for an HTTP hub only

        return HttpHubReader(address.endpoint, token)
    from .local_git import LocalGitHub  # noqa: PLC0415 - cost: kbuild --help imports kbuild.hubs, not subprocess

    return LocalGitHub(address.folder)


def _require_hub_client(endpoint: str) -> None:
    if importlib.util.find_spec("huggingface_hub") is None:
        raise HubClientMissing(f"{endpoint} is an HTTP hub, which kbuild reads through huggingface_hub, and this "
                               f"Python ({sys.executable}) has none: install kbuild's hub extra "
                               '(pip install "kbuild[hub]")', name="huggingface_hub")
