"""A local file's bytes for a streamed response, in bounded chunks: memory per download of one
chunk whatever the file's size. A local repo's files are served this way from their blobs'
plain-file copies (kbuild_hub/server/sources.py, LocalSource).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import anyio.to_thread

CHUNK = 128 << 10


async def file_chunks(path: Path, start: int, end: int) -> AsyncIterator[bytes]:
    """The bytes [start, end) of `path`, CHUNK at a time, each read in a worker thread (a cold
    disk must not stall the event loop). StreamingResponse stops asking when the client leaves."""
    fd = os.open(path, os.O_RDONLY)
    try:
        while start < end:
            data = await anyio.to_thread.run_sync(os.pread, fd, min(CHUNK, end - start), start)
            if not data:
                return
            start += len(data)
            yield data
    finally:
        os.close(fd)
