"""Connection hygiene for `kbuild hub serve`: uvicorn times out idle keep-alive connections, but
not one that never finishes its request headers, and it accepts connections until the process
runs out of file descriptors. Both let a few thousand idle sockets lock real clients out (and
fill the log with "Too many open files"); this protocol closes a connection whose headers are
not complete within `header_timeout`, and refuses connections beyond `max_connections`.
"""

from __future__ import annotations

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

HEADER_TIMEOUT_S = 10.0
MAX_CONNECTIONS = 512
KEEP_ALIVE_S = 5


class GuardedH11(H11Protocol):
    header_timeout = HEADER_TIMEOUT_S
    max_connections = MAX_CONNECTIONS

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        self._header_timer = None
        if len(self.connections) > self.max_connections:
            transport.close()  # no fd kept for it; the client sees a closed connection at once
            return
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self._in_request():
            self._disarm()
        elif self._header_timer is None:  # bytes of a next request: its headers are on the clock
            self._arm()

    def connection_lost(self, exc) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _in_request(self) -> bool:
        return self.cycle is not None and not self.cycle.response_complete

    def _arm(self) -> None:
        self._header_timer = self.loop.call_later(self.header_timeout, self._headers_too_slow)

    def _disarm(self) -> None:
        if getattr(self, "_header_timer", None) is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_too_slow(self) -> None:
        self._header_timer = None
        if not self._in_request():
            self.transport.close()


def uvicorn_config(app, header_timeout: float = HEADER_TIMEOUT_S, max_connections: int = MAX_CONNECTIONS):
    """uvicorn's configuration for the hub app, with GuardedH11 as its HTTP protocol."""
    protocol = type("HubH11", (GuardedH11,), {"header_timeout": header_timeout, "max_connections": max_connections})
    return uvicorn.Config(app, http=protocol, log_level="warning", access_log=False, lifespan="off",
                          timeout_keep_alive=KEEP_ALIVE_S, limit_concurrency=max_connections,
                          h11_max_incomplete_event_size=64 * 1024)
