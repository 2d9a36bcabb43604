"""Open the hub backend an address names."""

from __future__ import annotations

from builder.hub.address import HubAddress


def open_hub(address: HubAddress, token: str | None):
    if address.local is not None:
        from builder.hub.local_backend import LocalHub

        return LocalHub(address.local)
    from builder.hub.http_backend import HttpHub

    return HttpHub(address.endpoint, token)
