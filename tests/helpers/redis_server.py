"""A real redis-server on 127.0.0.1 for the shared-compile-cache tests (Debian's, installed by
ci/setup.sh): started on a free port with no persistence, stopped afterwards."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ping(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
    except OSError:
        return False


@contextmanager
def redis_server(folder: Path) -> Iterator[str]:
    """A running server; yields its URL (redis://127.0.0.1:PORT)."""
    binary = shutil.which("redis-server")
    assert binary, "redis-server is not installed: run ci/setup.sh (it installs Debian's redis-server)"
    port = free_port()
    folder.mkdir(parents=True, exist_ok=True)
    log = (folder / "redis.log").open("wb")
    server = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                               "--dir", str(folder)], stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 20
        while not ping(port):
            assert server.poll() is None, (folder / "redis.log").read_text()
            assert time.monotonic() < deadline, "redis-server did not answer within 20 s"
            time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()


def keys(url: str) -> int:
    """How many entries the server holds (DBSIZE)."""
    port = int(url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"DBSIZE\r\n")
        reply = s.recv(64)
    assert reply.startswith(b":"), reply
    return int(reply[1:].split(b"\r\n")[0])
