"""`kbuild hub serve` under slow, idle and non-reading clients (issue 26): each phase of a
connection has a time limit, connections are capped per client address and in total, and a real
client is answered within 1 s while 600 abusive connections are held. Real uvicorn, real sockets;
the abusers connect from other loopback addresses (127.0.0.2…) than the real client (127.0.0.1)."""

from __future__ import annotations

import select
import socket
import threading
import time

import pytest
import uvicorn

from hubserver import TOKEN
from kbuild_hub.gitstore import FileAdd
from kbuild_hub.server import ServerConfig, Tokens, build_app, listen
from kbuild_hub.server.connections import Limits, uvicorn_config

BIG = 8 << 20  # enough to fill the socket buffers of a client that does not read


class Server:
    def __init__(self, root, limits: Limits, **settings):
        config = ServerConfig(root=root, tokens=Tokens((TOKEN,), root / "tokens"), **settings)
        self.app = build_app(config)
        sock = listen("127.0.0.1", 0)
        self.port = sock.getsockname()[1]
        self.server = uvicorn.Server(uvicorn_config(self.app, limits.header_timeout, limits.max_connections, limits))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [sock]}, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            assert time.monotonic() < deadline
            time.sleep(0.01)

    def stop(self):
        self.server.should_exit = True
        self.thread.join(10)


def connect(port: int, source: str = "127.0.0.1") -> socket.socket:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connecting: a small window
    s.settimeout(10)
    s.bind((source, 0))
    s.connect(("127.0.0.1", port))
    return s


def timed_request(port: int, path: str = "/api/kernels/org/big/refs") -> tuple[int, float]:
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    return int(data.split(b" ", 2)[1]), time.monotonic() - started


def closed_within(s: socket.socket, seconds: float) -> bool:
    s.settimeout(seconds)
    try:
        while s.recv(65536):
            pass
        return True
    except TimeoutError:
        return False
    except OSError:
        return True


@pytest.fixture
def hub_root(tmp_path):
    root = tmp_path / "hub"
    store = build_app(ServerConfig(root=root, tokens=Tokens((TOKEN,), root / "t"))).hub.store
    store.create_repo("kernel", "org/big")
    store.commit("kernel", "org/big", "main", add=[FileAdd("big.bin", b"\xab" * BIG)], message="big", parent=None)
    return root


def abuse(port: int, kind: str, source: str) -> socket.socket:
    s = connect(port, source)
    if kind == "slowloris":
        s.sendall(b"GET /api/whoami-v2 HTTP/1.1\r\nHost: x\r\n")
    elif kind == "slow body":
        s.sendall(b"POST /api/validate-yaml HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\nx")
    elif kind == "non-reading":
        s.sendall(b"GET /kernels/org/big/resolve/main/big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
    return s  # "idle": nothing at all


def test_a_real_request_is_answered_within_1s_while_600_abusive_connections_are_held(hub_root):
    server = Server(hub_root, Limits(max_connections=512, max_per_client=32))
    held = []
    try:
        kinds = ["idle", "slowloris", "slow body", "non-reading"]
        for i in range(600):  # 20 addresses x 30 connections, four kinds
            held.append(abuse(server.port, kinds[i % 4], f"127.0.0.{2 + i % 20}"))
        time.sleep(1.0)  # the non-readers' responses have filled their buffers
        times = []
        for _ in range(5):
            status, seconds = timed_request(server.port)
            assert status == 200
            times.append(seconds)
            time.sleep(0.2)
        assert max(times) < 1.0, times
        registry = server.server.config.http.registry
        assert registry.total <= 512 and max(len(c) for c in registry.by_address.values()) <= 32
    finally:
        for s in held:
            s.close()
        server.stop()


def test_each_phase_has_its_time_limit(hub_root):
    limits = Limits(header_timeout=1.0, body_grace=1.0, body_min_rate=1000, send_timeout=1.5, keep_alive=1)
    server = Server(hub_root, limits)
    try:
        idle = abuse(server.port, "idle", "127.0.0.2")
        loris = abuse(server.port, "slowloris", "127.0.0.3")
        body = abuse(server.port, "slow body", "127.0.0.4")
        reader = abuse(server.port, "non-reading", "127.0.0.5")
        keep = connect(server.port, "127.0.0.6")
        keep.sendall(b"GET /api/whoami-v2 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + TOKEN.encode() + b"\r\n\r\n")
        assert keep.recv(12).startswith(b"HTTP/1.1 200")
        for _ in range(4):  # a byte a second does not keep a body alive
            time.sleep(0.5)
            try:
                body.sendall(b"x")
                loris.sendall(b"X")
            except OSError:
                break
        assert all(closed_within(s, 8) for s in (idle, loris, body, reader, keep))
        assert timed_request(server.port)[0] == 200
        for s in (idle, loris, body, reader, keep):
            s.close()
    finally:
        server.stop()


def test_a_reader_that_keeps_reading_is_not_cut_off(hub_root):
    server = Server(hub_root, Limits(send_timeout=1.0))
    try:
        with connect(server.port) as s:
            s.sendall(b"GET /kernels/org/big/resolve/main/big.bin HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            got = 0
            while chunk := s.recv(1 << 16):
                got += len(chunk)
                time.sleep(0.0005)  # slow, but never stalled for a second
        assert got > BIG
    finally:
        server.stop()


def test_per_address_cap_and_a_full_server_makes_room_for_a_new_address(hub_root):
    server = Server(hub_root, Limits(max_connections=40, max_per_client=30, header_timeout=30))
    try:
        mine = [connect(server.port, "127.0.0.2") for _ in range(35)]
        time.sleep(0.3)
        assert sum(closed_within(s, 0.3) for s in mine) == 5  # the address's cap: 30
        others = [connect(server.port, "127.0.0.3") for _ in range(10)]  # fills the server: 40
        time.sleep(0.3)
        assert timed_request(server.port)[0] == 200  # room made: 127.0.0.2's oldest went
        assert closed_within(mine[0], 1)
        assert not any(closed_within(s, 0.1) for s in others)
        for s in mine + others:
            s.close()
    finally:
        server.stop()


# -- uploads over the limits -------------------------------------------------------------------

COMMIT = (b"POST /api/kernels/org/big/commit/main HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + TOKEN.encode() +
          b"\r\n")


def status_of(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/") else 0


def test_a_commit_declared_over_the_limit_is_refused_before_its_body_is_sent(hub_root):
    server = Server(hub_root, Limits(), max_commit_size=10 << 20)
    try:
        with connect(server.port) as s:
            s.sendall(COMMIT + b"Content-Length: 1073741824\r\n\r\n")  # and not a byte of the body
            s.settimeout(5)
            answer = s.recv(4096)
        assert status_of(answer) == 413 and b"10485760" in answer
    finally:
        server.stop()


def test_a_chunked_commit_is_cut_off_at_the_file_limit(hub_root):
    server = Server(hub_root, Limits(), max_file_size=1 << 20)
    try:
        with connect(server.port) as s:
            s.sendall(COMMIT + b"Transfer-Encoding: chunked\r\n\r\n")
            line = b'{"key": "header", "value": {"summary": "x"}}\n{"key": "file", "value": {"path": "a", "content": "'
            s.sendall(b"%x\r\n%s\r\n" % (len(line), line))
            sent, answer, piece = 0, b"", b"QUFB" * 16384  # base64 without end
            s.settimeout(5)
            try:
                while sent < 64 << 20 and not select.select([s], [], [], 0)[0]:  # the answer must come long before
                    s.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
                    sent += len(piece)
                answer = s.recv(4096)
            except OSError:
                pass
        assert status_of(answer) == 413 and b"1048576" in answer, (sent, answer[:300])
        assert sent < 16 << 20  # what the socket buffers held before the answer came back
        assert not list((hub_root / ".tmp").rglob("file-*"))  # nothing of it left in scratch
    finally:
        server.stop()
