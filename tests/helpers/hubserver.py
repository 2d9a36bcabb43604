"""A real `kbuild hub serve` app under uvicorn on a free 127.0.0.1 port, in a daemon thread,
shared by the tests that talk HTTP to a hub."""

from __future__ import annotations

import http.client
import threading
import time
from pathlib import Path

import uvicorn

from kbuild_hub.server import ServerConfig, Tokens, Upstream, build_app, listen
from kbuild_hub.server.connections import HEADER_TIMEOUT_S, MAX_CONNECTIONS, uvicorn_config
from kbuild_hub.upstream.policy import UpstreamPolicy

TOKEN = "kb_test_write_token"


class ServerThread:
    """The real app under uvicorn on a free 127.0.0.1 port, in a daemon thread."""

    def __init__(self, root: Path, *, public_read: bool = True, max_file_size: int | None = None,
                 trusted: tuple[str, ...] = (), header_timeout: float = HEADER_TIMEOUT_S,
                 max_connections: int = MAX_CONNECTIONS, guarded: bool = True, upstream: Upstream | None = None,
                 policy: UpstreamPolicy | None = None):
        config = ServerConfig(root=root, tokens=Tokens((TOKEN,), root / "tokens"), public_read=public_read,
                              max_file_size=max_file_size, trusted_orgs=frozenset(trusted),
                              upstream_policy=policy or UpstreamPolicy())
        self.log: list[str] = []
        self._in_flight = 0  # requests the app has begun and not yet logged
        sock = listen("127.0.0.1", 0)
        self.port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.app = build_app(config, self.log.append, upstream)  # the HubApp, for tests that reach its store
        app = self._counted(self.app)
        # guarded=False: uvicorn's own protocol, to show what the guard changes
        self.server = uvicorn.Server(uvicorn_config(app, header_timeout, max_connections) if guarded else
                                     uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [sock]}, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            assert time.monotonic() < deadline, "the hub server did not start"
            time.sleep(0.01)

    def _counted(self, app):
        """`app`, counting the requests in it: the app logs a request after its last byte has gone
        out, so a client can hold a whole response before the line is there."""
        async def counted(scope, receive, send):
            self._in_flight += 1  # one event loop: no lock needed
            try:
                await app(scope, receive, send)
            finally:
                self._in_flight -= 1
        return counted

    def logged(self, since: int = 0, timeout: float = 10.0) -> list[str]:
        """The log lines from `since` on, once no request is in the app: every request whose answer a
        client has read in full has its line by then."""
        deadline = time.monotonic() + timeout
        while self._in_flight and time.monotonic() < deadline:
            time.sleep(0.005)
        return self.log[since:]

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)
        self.app.close()

    def raw(self, method: str, path: str, body: bytes | None = None, headers: dict | None = None):
        """A request with the path sent byte for byte (no client-side normalisation of `..`)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            response = conn.getresponse()
            return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
        finally:
            conn.close()
