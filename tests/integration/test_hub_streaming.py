"""Downloads from `kbuild hub serve` (issue 26): read from plain-file copies of the blobs in
bounded chunks, with no process per request, resumable with `Range` the way huggingface_hub
resumes. Real server on 127.0.0.1, real huggingface_hub."""

from __future__ import annotations

import hashlib
import os
import socket
import time
from pathlib import Path

import pytest

from hubserver import ServerThread
from kbuild_hub.gitstore import FileAdd

SIZE = 5 << 20
DATA = hashlib.sha256(b"seed").digest() * (SIZE // 32)
URL = "/kernels/org/s/resolve/main/data.bin"


@pytest.fixture
def server(tmp_path):
    running = ServerThread(tmp_path / "hub")
    store = running.app.hub.store
    store.create_repo("kernel", "org/s")
    store.commit("kernel", "org/s", "main", add=[FileAdd("data.bin", DATA), FileAdd("empty", b"")], message="m",
                 parent=None)
    yield running
    running.stop()


def git_children() -> int:
    """git processes that are children of this process (the server runs in it)."""
    count = 0
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        for child in (task / "children").read_text().split():
            try:
                count += Path(f"/proc/{child}/comm").read_text().strip() == "git"
            except FileNotFoundError:
                pass
    return count


def test_ranges_answer_206_with_content_range(server):
    status, head, body = server.raw("GET", URL)
    assert (status, body == DATA, head["content-length"], head["etag"].strip('"')) == (
        200, True, str(SIZE), hashlib.sha1(b"blob %d\0" % SIZE + DATA).hexdigest())
    for asked, (start, end) in {"bytes=100-199": (100, 200), "bytes=4000000-": (4000000, SIZE),
                                "bytes=-10": (SIZE - 10, SIZE), "bytes=0-99999999": (0, SIZE)}.items():
        status, head, body = server.raw("GET", URL, headers={"Range": asked})
        assert status == 206 and body == DATA[start:end], asked
        assert head["content-range"] == f"bytes {start}-{end - 1}/{SIZE}"
    status, head, _ = server.raw("GET", URL, headers={"Range": f"bytes={SIZE}-"})
    assert status == 416 and head["content-range"] == f"bytes */{SIZE}"
    assert server.raw("GET", "/kernels/org/s/resolve/main/empty")[::2] == (200, b"")


def test_huggingface_hub_resumes_a_partial_download_with_range(server, tmp_path):
    """huggingface_hub's own resume (what its download retries after a broken connection):
    `http_get` with the bytes already on disk asks `Range: bytes=<have>-` and appends the 206."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.file_download import http_get

    whole = Path(hf_hub_download("org/s", "data.bin", repo_type="kernel", endpoint=server.url, token=False,
                                 cache_dir=str(tmp_path / "hf")))
    assert whole.read_bytes() == DATA
    partial = tmp_path / "partial"
    partial.write_bytes(DATA[:SIZE // 3])  # what a broken connection left
    with partial.open("ab") as f:
        http_get(server.url + URL, f, resume_size=SIZE // 3, expected_size=SIZE)
    assert partial.read_bytes() == DATA
    assert any(line.startswith(f"GET {URL} 206 ") for line in server.logged()), server.log


def test_held_downloads_run_no_process_each(server):
    server.raw("GET", URL)  # the one copy of the blob is made here
    held = []
    for _ in range(20):  # clients that start the download and do not read on
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect(("127.0.0.1", server.port))
        s.sendall(f"GET {URL} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        held.append(s)
    time.sleep(0.5)
    try:
        assert git_children() == 0
        assert server.raw("GET", URL)[2] == DATA  # and the file is served meanwhile
    finally:
        for s in held:
            s.close()


def test_the_copy_is_made_once_and_exact(server):
    root = server.app.hub.config.root
    server.raw("GET", URL)
    copies = [p for p in (root / ".blobs").rglob("*") if p.is_file()]
    assert len(copies) == 1 and copies[0].read_bytes() == DATA
    assert copies[0].stat().st_mode & 0o777 == 0o444
    made = copies[0].stat().st_mtime_ns
    assert server.raw("GET", URL, headers={"Range": "bytes=1-2"})[2] == DATA[1:3]
    assert copies[0].stat().st_mtime_ns == made


def test_a_packed_blob_is_copied_as_exactly(server):
    hub = server.app.hub
    hub.store.gc(grace_s=0)  # packs the loose objects a publish wrote
    repo = hub.store.repo_dir("kernel", "org/s")
    assert not any(p.is_file() for p in (repo / "objects").glob("??/*"))
    assert server.raw("GET", URL, headers={"Range": "bytes=7-"})[2] == DATA[7:]
