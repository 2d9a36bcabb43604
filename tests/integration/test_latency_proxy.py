"""bench/latency_proxy.py, which bench/loader.py --rtt-ms puts between the loaders and the hub: a
real HTTP server on 127.0.0.1 behind it answers byte for byte, a new connection costs two round
trips to its first response (handshake, then request and answer), a kept-alive one one, and a long
body streams rather than paying a round trip per chunk."""

from __future__ import annotations

import http.client
import http.server
import importlib.util
import os
import threading
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RTT = 0.2  # seconds: well above a loaded 2-core machine's scheduling noise
BODY = os.urandom(4 << 20)
# what a loaded CI machine may add; a body relayed a round trip per 64 KiB chunk would add 6.4 s
SLACK = 3.0


def _load_proxy():
    spec = importlib.util.spec_from_file_location("latency_proxy", REPO / "bench" / "latency_proxy.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.LatencyProxy


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as huggingface_hub's client uses it

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def server():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd.server_address[1]
    httpd.shutdown()
    httpd.server_close()


def _get(conn: http.client.HTTPConnection) -> tuple[bytes, float]:
    start = time.monotonic()
    conn.request("GET", "/blob")
    body = conn.getresponse().read()
    return body, time.monotonic() - start


def test_each_round_trip_costs_the_rtt_and_bytes_pass_unchanged(server):
    with _load_proxy()("127.0.0.1", server, rtt_ms=RTT * 1000) as proxy:
        conn = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=30)
        first, cold = _get(conn)  # connect (one round trip), then the request and its answer
        again, warm = _get(conn)  # the same connection: the request and its answer only
        conn.close()
        assert first == BODY and again == BODY
        assert 2 * RTT <= cold < 2 * RTT + SLACK, cold
        assert RTT <= warm < RTT + SLACK, warm  # streamed, not a round trip per chunk
        assert proxy.connections == 1

        direct = http.client.HTTPConnection("127.0.0.1", server, timeout=30)
        body, seconds = _get(direct)
        direct.close()
        assert body == BODY and seconds < RTT
