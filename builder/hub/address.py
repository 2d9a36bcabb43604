"""`--hub` / `KBUILD_HUB` / `HF_ENDPOINT`: the runtime's hub-address parser
(kbuild.hubs.parse_hub_address), with its errors as one-line usage errors naming where the address
came from (which of them wins is config/environment.py's `hub_setting`)."""

from __future__ import annotations

from kbuild.errors import InvalidRequest
from kbuild.hubs import HubAddress, parse_hub_address
from kbuild.settings import DEFAULT_LOCAL_HUB

from kbuild_common.errors import UsageError

__all__ = ["DEFAULT_LOCAL_HUB", "HubAddress", "parse_hub"]


def parse_hub(value: str | None, origin: str = "--hub") -> HubAddress:
    """None means the embedded default, a local hub under ~/.cache/kbuild/hub."""
    try:
        return parse_hub_address(value)
    except InvalidRequest as e:
        raise UsageError(f"{origin}: {e}") from None
