"""`kbuild hub serve` under idle and half-sent connections (issue 10, finding 5): a connection
that does not finish its request headers in time is closed, connections beyond the cap are
refused at once, and a real client is served all along. Real uvicorn, real sockets."""

from __future__ import annotations

import socket
import time

import pytest

from hubserver import ServerThread


def half_request(port: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(b"GET /api/models HTTP/1.1\r\nHost: x\r\n")  # never the blank line that ends the headers
    return s


def closed_by_server(s: socket.socket, within: float) -> bool:
    s.settimeout(within)
    try:
        return s.recv(1) == b""
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


def served(server: ServerThread) -> bool:
    status, _, _ = server.raw("GET", "/api/whoami-v2")
    return status in (200, 401)


@pytest.fixture
def server(tmp_path):
    running = ServerThread(tmp_path / "hub", header_timeout=1.0, max_connections=40)
    yield running
    running.stop()


def test_connections_that_never_finish_their_headers_are_closed(server):
    idle = [half_request(server.port) for _ in range(30)]
    trickle = half_request(server.port)
    for _ in range(3):  # a byte now and then does not keep a connection alive past the timeout
        time.sleep(0.3)
        try:
            trickle.sendall(b"X")
        except OSError:
            break
    assert served(server)  # real clients are served meanwhile
    assert all(closed_by_server(s, within=5) for s in idle)
    assert closed_by_server(trickle, within=5)
    for s in idle + [trickle]:
        s.close()


def test_connections_beyond_the_cap_are_refused_and_service_recovers(server):
    idle = [socket.create_connection(("127.0.0.1", server.port), timeout=10) for _ in range(60)]
    time.sleep(0.3)
    refused = sum(closed_by_server(s, within=0.5) for s in idle)
    assert refused >= 15, refused  # 60 opened, at most 40 kept
    time.sleep(1.5)  # the kept ones send nothing: closed by the header timeout
    assert served(server)
    for s in idle:
        s.close()


def test_accepted_connections_send_without_waiting_for_the_clients_ack():
    """TCP_NODELAY on every accepted connection, as asyncio sets it on a socket that says TCP:
    without it each request on a kept-alive connection waited ~40 ms for the client's delayed
    ACK before its response body was sent (headers and body are two writes)."""
    import asyncio

    from kbuild_hub.server import listen

    async def accepted_nodelay() -> int:
        seen: asyncio.Future = asyncio.get_running_loop().create_future()

        class Probe(asyncio.Protocol):
            def connection_made(self, transport):
                sock = transport.get_extra_info("socket")
                seen.set_result(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
                transport.close()

        sock = listen("127.0.0.1", 0)
        server = await asyncio.get_running_loop().create_server(Probe, sock=sock)
        async with server:
            _, writer = await asyncio.open_connection("127.0.0.1", sock.getsockname()[1])
            value = await asyncio.wait_for(seen, 10)
            writer.close()
            return value

    assert asyncio.run(accepted_nodelay()) != 0
