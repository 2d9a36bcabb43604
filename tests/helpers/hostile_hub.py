"""A hostile hub on 127.0.0.1 (issue 26): a proxy in front of a real `kbuild hub serve` that
answers every request as the real hub does, except while `hostile` is set. Then it serves edited
files under the honest commit ids, with a metadata.json whose digest matches the edits and
listings whose sizes and blob ids match them too, so nothing but a lock file's hash of
metadata.json can tell. It can also claim sizes it does not send (`claim_size`) and send bytes
it did not list (`padding`).

Used by the cache tests and by bench/reliability.py.
"""

from __future__ import annotations

import base64
import hashlib
import http.client
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

_TREE = re.compile(r"^/api/kernels/([^/]+/[^/]+)/tree/([^/]+)/build/([^/]+)$")
_COMMIT_TREE = re.compile(r"^/api/kernels/([^/]+/[^/]+)/tree/([^/]+)$")  # a whole commit (kbuild's loader lists it)
_RESOLVE = re.compile(r"^/kernels/[^/]+/[^/]+/resolve/[^/]+/build/([^/]+)/(.+)$")
_DROPPED = {"content-length", "transfer-encoding", "connection", "etag", "x-linked-etag", "x-linked-size",
            "content-range"}


def blob_oid(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class HostileHub:
    """`url` fronts `upstream`. While `hostile`: `edits` (a variant-relative path -> its new
    bytes) replace those files in every variant, metadata.json's digest and the listings follow;
    `claim_size` (if set) is the size the listings give every file; `padding` bytes of zeros
    follow every variant file served. `downloads` counts the variant files served."""

    def __init__(self, upstream: str, edits: dict[str, bytes] | None = None):
        self.upstream = urlsplit(upstream)
        self.edits = dict(edits or {})
        self.hostile = False
        self.claim_size: int | None = None
        self.padding = 0
        self.downloads = 0
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def log_message(self, *args):
                pass

            def do_GET(self):
                status, headers, body = hub.answer(self.path, dict(self.headers.items()))
                self.send_response(status)
                for k, v in headers:
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):  # the client stopped reading
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._lock = threading.Lock()
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    # -- what it answers ---------------------------------------------------------------------------

    def answer(self, path: str, headers: dict) -> tuple[int, list, bytes]:
        status, upstream_headers, body = self._forward(path, headers)
        kept = [(k, v) for k, v in upstream_headers if k.lower() not in _DROPPED]
        route = unquote(path.split("?")[0])
        if status != 200:
            return status, kept, body
        resolve = _RESOLVE.match(route)
        if resolve:
            with self._lock:
                self.downloads += 1
            if self.hostile:
                body = self._content(resolve.group(1), resolve.group(2), body) + b"\0" * self.padding
            return status, kept, body
        tree = _TREE.match(route) or _COMMIT_TREE.match(route)
        if tree and self.hostile:
            repo, rev, *variant = tree.groups()
            body = json.dumps(self._listing(f"/kernels/{repo}/resolve/{rev}/", variant[0] if variant else None,
                                            json.loads(body))).encode()
        return status, kept, body

    def _content(self, variant: str, rel: str, honest: bytes) -> bytes:
        if rel in self.edits:
            return self.edits[rel]
        if rel == "metadata.json":
            meta = json.loads(honest)
            for name, data in self.edits.items():  # the digest vouches for the edits
                meta["digest"]["files"][name] = base64.b64encode(hashlib.sha256(data).digest()).decode()
            return json.dumps(meta, indent=2).encode()
        return honest

    def _listing(self, resolve: str, variant: str | None, entries: list) -> list:
        """`entries` with the edited files' sizes and blob ids: those of `variant`'s folder, or of
        every variant's (None: a listing of the whole commit)."""
        for entry in entries:
            parts = entry["path"].split("/", 2)
            if entry.get("type") != "file" or len(parts) < 3 or parts[0] != "build" or variant not in (None, parts[1]):
                continue
            variant_of, rel = parts[1], parts[2]
            if rel in self.edits or rel == "metadata.json":
                honest = self._forward(resolve + entry["path"], {})[2]
                data = self._content(variant_of, rel, honest)
                entry.update(size=len(data), oid=blob_oid(data))
                entry.pop("lfs", None)
            if self.claim_size is not None:
                entry["size"] = self.claim_size
        return entries

    def _forward(self, path: str, headers: dict) -> tuple[int, list, bytes]:
        if self.upstream.hostname is None:
            raise ValueError(f"no host in the upstream URL {self.upstream.geturl()}")
        conn = http.client.HTTPConnection(self.upstream.hostname, self.upstream.port, timeout=30)
        try:
            sent = {k: v for k, v in headers.items() if k.lower() not in ("host", "connection")}
            conn.request("GET", path, headers=sent)
            response = conn.getresponse()
            return response.status, response.getheaders(), response.read()
        finally:
            conn.close()
