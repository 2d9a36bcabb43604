"""open_hub: the publisher's backend for the hub an address names. An address with neither a folder nor an
endpoint is the default local hub (kbuild.hubs.HubAddress says so); it was opened as an HTTP hub without an
endpoint."""

from __future__ import annotations

from builder.hub.address import DEFAULT_LOCAL_HUB, HubAddress, parse_hub
from builder.hub.http_backend import HttpHubBackend
from builder.hub.local_backend import LocalHubBackend
from builder.hub.open import open_hub


def test_a_folder_is_a_local_hub_and_an_url_an_http_one(tmp_path):
    local = open_hub(parse_hub(str(tmp_path / "hub")), None)
    assert isinstance(local, LocalHubBackend) and local.store.root == tmp_path / "hub"
    http = open_hub(parse_hub("http://127.0.0.1:8000/"), None)
    assert isinstance(http, HttpHubBackend) and http.endpoint == "http://127.0.0.1:8000"


def test_an_address_naming_neither_is_the_default_local_hub():
    backend = open_hub(HubAddress(), None)
    assert isinstance(backend, LocalHubBackend)
    assert backend.store.root == DEFAULT_LOCAL_HUB.expanduser()
