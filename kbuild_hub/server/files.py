"""`HEAD`/`GET …/resolve/{rev}/{path}`: one file's bytes, read from the blob's plain-file copy
(kbuild_hub/blobfiles.py) in bounded chunks: no process per request, and memory per download
of one chunk whatever the file's size.

huggingface_hub sends HEAD first and keys its cache on `X-Repo-Commit` and `ETag` (the git blob
id, quoted), then GETs, resuming with `Range: bytes=<have>-` after a broken connection (206 with
`Content-Range`).
"""

from __future__ import annotations

import re

from starlette.responses import Response, StreamingResponse

from kbuild_hub.errors import EntryNotFound, HubError
from kbuild_hub.server.context import Call, Hub
from kbuild_hub.server.routing import check_ref
from kbuild_hub.server.sources import source

_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")


_SVG = "image/svg+xml"  # kbuild bench's plots, which kernel pages show as images


class RangeNotSatisfiable(HubError):
    http_status = 416


def resolve(hub: Hub, call: Call, range_header: str | None) -> Response:
    repo = source(hub, call)
    resolved = repo.resolve(check_ref(call.params["rev"]))
    commit = resolved.commit
    path = hub.store.validate_path(call.params["path"])
    try:
        ref = repo.file(commit, path)
    except EntryNotFound as e:
        e.headers = {"X-Repo-Commit": commit}  # the client caches "no such file at this commit"
        raise
    headers = {"X-Repo-Commit": commit, "ETag": f'"{ref.etag}"', "Accept-Ranges": "bytes",
               "Content-Type": _SVG if path.endswith(".svg") else "application/octet-stream",
               "Cache-Control": "private, max-age=0",
               # a published file is the publisher's: shown by a browser (a benchmark plot on a
               # kernel page), it may run nothing, load nothing and be framed by nothing
               "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; sandbox",
               "X-Content-Type-Options": "nosniff", **repo.headers(resolved.stale)}
    span = byte_range(range_header, ref.size)
    if call.method == "HEAD":
        return Response(status_code=200, headers={**headers, "Content-Length": str(ref.size)})
    if span is None:
        start, end, status = 0, ref.size, 200
    else:
        (start, end), status = span, 206
        headers["Content-Range"] = f"bytes {start}-{end - 1}/{ref.size}"
    headers["Content-Length"] = str(end - start)
    # an upstream file is fetched (and, for a kernel variant, verified) before the first byte
    # goes out: a refusal is still an error response, not a cut-off body
    body = repo.chunks(commit, ref, start, end)
    if not hasattr(body, "__aiter__"):
        body = _first_ready(body)
    return StreamingResponse(body, status_code=status, headers=headers)


def _first_ready(chunks):
    """A sync iterator whose first chunk is taken now (in the handler's worker thread), so that
    errors before any byte is sent become error responses."""
    chunks = iter(chunks)
    try:
        first = next(chunks)
    except StopIteration:
        return iter(())

    def rest():
        yield first
        yield from chunks
    return rest()


def byte_range(header: str | None, size: int) -> tuple[int, int] | None:
    """`Range: bytes=a-b` → (start, end exclusive); None to send the whole file (no header, or
    several ranges, which a server may answer in full). Unsatisfiable → 416."""
    if not header or size == 0:
        return None
    m = _RANGE.match(header.strip())
    if m is None:
        return None
    first, last = m.groups()
    if first == "" and last == "":
        return None
    if first == "":  # the last N bytes
        start, end = max(size - int(last), 0), size
    else:
        start = int(first)
        end = min(int(last) + 1, size) if last else size
    if start >= size or end <= start:
        error = RangeNotSatisfiable(f"range {header!r} is outside the file ({size} bytes)")
        error.headers = {"Content-Range": f"bytes */{size}"}
        raise error
    return start, end
