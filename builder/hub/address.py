"""`--hub` / `KBUILD_HUB` / `HF_ENDPOINT`, and the HTTP hubs `kbuild hub serve --upstream` and
`kbuild hub mirror --from` name: the runtime's hub-address parser (kbuild.hubs.parse_hub_address),
with its errors as one-line usage errors naming where the address came from (which of them wins
is config/environment.py's `hub_setting`)."""

from __future__ import annotations

from urllib.parse import urlsplit

from kbuild.errors import InvalidRequest
from kbuild.hubs import HubAddress, parse_hub_address
from kbuild.settings import DEFAULT_LOCAL_HUB
from kbuild_common.errors import UsageError

__all__ = ["DEFAULT_LOCAL_HUB", "HubAddress", "parse_hub", "parse_hub_url"]


def parse_hub(value: str | None, origin: str = "--hub") -> HubAddress:
    """None means the embedded default, a local hub under ~/.cache/kbuild/hub."""
    try:
        return parse_hub_address(value)
    except InvalidRequest as e:
        raise UsageError(f"{origin}: {e}") from None


def parse_hub_url(text: str, origin: str, error: type = UsageError) -> str:
    """An HTTP hub's endpoint (no trailing slash), as the one parser reads it; a folder, another
    scheme, or a query or fragment (API paths are appended to it) is `error` naming `origin`.
    The signature of config/cascade.py's `parse`, for the settings that name a hub URL."""
    try:
        endpoint = parse_hub_address(text.strip()).endpoint
    except InvalidRequest:
        endpoint = None
    if endpoint is None or urlsplit(endpoint).query or urlsplit(endpoint).fragment:
        raise error(f"{origin}: expected an http(s) URL of a hub such as https://huggingface.co, got {text!r}")
    return endpoint
