"""Open the hub backend an address names."""

from __future__ import annotations

from builder.hub.address import HubAddress
from builder.hub.http_backend import HttpHubBackend
from builder.hub.local_backend import LocalHubBackend


def open_hub(address: HubAddress, token: str | None):
    if address.endpoint is None:  # a local hub's folder, or neither: the default local hub (HubAddress.folder)
        return LocalHubBackend(address.folder)

    return HttpHubBackend(address.endpoint, token)
