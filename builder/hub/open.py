"""Open the hub backend an address names."""

from __future__ import annotations

from builder.hub.address import HubAddress


def open_hub(address: HubAddress, token: str | None):
    if address.local is not None:
        from builder.hub.local_backend import LocalHubBackend

        return LocalHubBackend(address.local)
    from builder.hub.http_backend import HttpHubBackend

    return HttpHubBackend(address.endpoint, token)
