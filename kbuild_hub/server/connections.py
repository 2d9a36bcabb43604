"""Connection hygiene for `kbuild hub serve`: every phase of a connection is on a clock, and
connections are capped per client address and in total, so slow, idle or non-reading clients
cannot lock real ones out (the limits are listed in README.md, "Reliability").

uvicorn alone times out only idle keep-alive connections: not a request whose headers never
finish, nor a body trickled a byte at a time, nor a client that stops reading a download (its
send waits forever). Its `limit_concurrency` answers 503 to everyone once the slow ones fill it.
`GuardedH11` adds the missing clocks, and `Registry` replaces the 503 with per-address caps: a
full server makes room by closing the oldest connection of the address that holds the most.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from dataclasses import dataclass, replace

import h11
import uvicorn  # noqa: TID253 - cost: this module subclasses uvicorn's protocol; serve() alone imports it, deferred
from uvicorn.protocols.http.h11_impl import H11Protocol, RequestResponseCycle  # noqa: TID253 - cost: as uvicorn above

HEADER_TIMEOUT_S = 10.0
MAX_CONNECTIONS = 512
MAX_PER_CLIENT = 64
KEEP_ALIVE_S = 5


@dataclass(frozen=True)
class Limits:
    header_timeout: float = HEADER_TIMEOUT_S  # from connecting (or a response's end) to complete headers
    body_grace: float = 10.0  # a request body may start slowly …
    body_min_rate: float = 1024.0  # … then must average this many bytes/s (time the app is not reading excluded)
    send_timeout: float = 30.0  # a response may wait this long for a client that does not read
    # after an early answer (413, an error mid-upload), this much of the unread body is read and
    # dropped, so a client that sends before it reads still gets the answer; then the connection goes
    discard_max: int = 64 << 20
    keep_alive: int = KEEP_ALIVE_S  # idle between requests (uvicorn's timeout_keep_alive: whole seconds)
    max_connections: int = MAX_CONNECTIONS
    max_per_client: int = MAX_PER_CLIENT
    tick: float = 0.5  # how often the body clock looks


class Registry:
    """The open connections of one server, by client address, oldest first."""

    def __init__(self, limits: Limits):
        self.limits = limits
        self.by_address: dict[str, OrderedDict] = {}
        self.total = 0

    def admit(self, protocol: GuardedH11, address: str) -> bool:
        """Register `protocol`; False (and nothing registered) when its address is at its cap or
        the server is full of connections from addresses that hold no more than it does."""
        mine = self.by_address.get(address)
        if mine is not None and len(mine) >= min(self.limits.max_per_client, self.limits.max_connections):
            return False
        if self.total >= self.limits.max_connections:
            heaviest = max(self.by_address, key=lambda a: len(self.by_address[a]))
            if len(self.by_address[heaviest]) <= (len(mine) if mine else 0) + 1:
                return False
            victim = next(iter(self.by_address[heaviest]))
            self.forget(victim, heaviest)
            victim.transport.abort()
        self.by_address.setdefault(address, OrderedDict())[protocol] = None
        self.total += 1
        return True

    def forget(self, protocol: GuardedH11, address: str) -> None:
        held = self.by_address.get(address)
        if held is not None and held.pop(protocol, False) is None:
            self.total -= 1
            if not held:
                del self.by_address[address]


class GuardedH11(H11Protocol):
    limits = Limits()
    registry: Registry  # one per server: uvicorn_config makes a subclass with its own
    _header_timer: asyncio.TimerHandle | None
    _body_timer: asyncio.TimerHandle | None
    _send_timer: asyncio.TimerHandle | None
    _body_bytes: int  # of the request on the body clock, and the seconds that clock ran
    _body_active: float
    _discarding: RequestResponseCycle | None  # the request whose unread body is being read and dropped

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        self._header_timer = self._body_timer = self._send_timer = None
        self._discarding, self._discarded = None, 0
        self._address = self.client[0] if self.client else "?"
        self._admitted = self.registry.admit(self, self._address)
        if not self._admitted:
            transport.abort()  # no fd kept for it; the client sees a closed connection at once
            return
        self._arm_headers()

    def data_received(self, data: bytes) -> None:
        if self._body_timer is not None:
            self._body_bytes += len(data)
        if self._answered_early():  # uvicorn reads the rest of the body to discard it: up to a bound
            if self._discarding is not self.cycle:
                self._discarding, self._discarded = self.cycle, 0
            self._discarded += len(data)
            if self._discarded > self.limits.discard_max:
                self.transport.abort()
                return
        super().data_received(data)
        if self._in_request():
            self._cancel("_header_timer")
            if self.cycle.more_body and self._body_timer is None and not self.transport.is_closing():
                self._body_bytes, self._body_active = 0, 0.0
                self._body_timer = self.loop.call_later(self.limits.tick, self._check_body)
        elif self._header_timer is None:  # bytes of a next request: its headers are on the clock
            self._arm_headers()

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._send_timer is None:
            self._send_timer = self.loop.call_later(self.limits.send_timeout, self._stalled_reader)

    def resume_writing(self) -> None:
        self._cancel("_send_timer")
        super().resume_writing()

    def connection_lost(self, exc) -> None:
        for timer in ("_header_timer", "_body_timer", "_send_timer"):
            self._cancel(timer)
        if getattr(self, "_admitted", False):
            self.registry.forget(self, self._address)
        super().connection_lost(exc)

    def _answered_early(self) -> bool:
        """The response went out before the request's body was in (a 413, an error mid-upload)."""
        return self.cycle is not None and self.cycle.response_complete and self.conn.their_state is h11.SEND_BODY

    def _in_request(self) -> bool:
        return self.cycle is not None and not self.cycle.response_complete

    def _arm_headers(self) -> None:
        self._header_timer = self.loop.call_later(self.limits.header_timeout, self._headers_too_slow)

    def _cancel(self, name: str) -> None:
        timer = getattr(self, name, None)
        if timer is not None:
            timer.cancel()
            setattr(self, name, None)

    def _headers_too_slow(self) -> None:
        self._header_timer = None
        if not self._in_request():
            self.transport.close()

    def _check_body(self) -> None:
        self._body_timer = None
        if not self._in_request() or not self.cycle.more_body or self.transport.is_closing():
            return
        if not self.flow.read_paused:  # paused: the app is not reading yet, so the client may not send
            self._body_active += self.limits.tick
        owed = self.limits.body_min_rate * (self._body_active - self.limits.body_grace)
        if self._body_bytes < owed:
            self.transport.abort()  # the app's receive() sees a disconnect
            return
        self._body_timer = self.loop.call_later(self.limits.tick, self._check_body)

    def _stalled_reader(self) -> None:
        self._send_timer = None
        if self.flow.write_paused:
            self.transport.abort()  # close() would wait for the unread buffer to drain


def uvicorn_config(app, header_timeout: float = HEADER_TIMEOUT_S, max_connections: int = MAX_CONNECTIONS,
                   limits: Limits | None = None):
    """uvicorn's configuration for the hub app, with a GuardedH11 of its own (its registry) as
    the HTTP protocol. `header_timeout` and `max_connections` override `limits`."""
    limits = replace(limits or Limits(), header_timeout=header_timeout, max_connections=max_connections)
    protocol = type("HubH11", (GuardedH11,), {"limits": limits, "registry": Registry(limits)})
    return uvicorn.Config(app, http=protocol, log_level="warning", access_log=False, lifespan="off",
                          timeout_keep_alive=limits.keep_alive, limit_concurrency=None,
                          h11_max_incomplete_event_size=64 * 1024)
