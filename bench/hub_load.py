"""Concurrent downloads from `kbuild hub serve` beside a plain static file server (issue 26).

    python bench/hub_load.py [--clients 200] [--size-mb 200] [--out FILE.json]

One file of --size-mb is published to a fresh local hub, served by the real `kbuild hub serve`
(a subprocess) and, the same bytes as a plain file, by Starlette's StaticFiles under uvicorn (a
subprocess). For each server, --clients downloads run at once (client processes of threads); each
client hashes every byte and checks it against the file's sha256. The peak resident memory of
the server and all its children together is sampled from /proc while the downloads run.
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import json
import multiprocessing
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO)]
from kbuild_hub.gitstore import FileAdd, GitStore  # noqa: E402

STATIC = """
import sys, uvicorn
from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.staticfiles import StaticFiles
app = Starlette(routes=[Mount("/", StaticFiles(directory=sys.argv[1]))])
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning", access_log=False)
"""


def make_file(path: Path, size: int) -> str:
    """`size` bytes that do not compress (a sha256 chain), written in 1 MB steps; their sha256."""
    digest, block = hashlib.sha256(), hashlib.sha256(b"kbuild").digest() * (1 << 15)
    with path.open("wb") as f:
        left = size
        while left:
            block = hashlib.sha256(block[:64]).digest() * (1 << 15)
            piece = block[:min(left, len(block))]
            f.write(piece)
            digest.update(piece)
            left -= len(piece)
    return digest.hexdigest()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss(pid: int) -> int:
    """Resident bytes of `pid` alone; 0 once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except (FileNotFoundError, ProcessLookupError):
        pass
    return 0


def tree_rss(pid: int) -> int:
    """Resident bytes of `pid` and all its descendants."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        total += rss(p)
        try:
            for task in Path(f"/proc/{p}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except (FileNotFoundError, ProcessLookupError):
            pass
    return total


class PeakSampler:
    """The peak resident memory of a process and its descendants (`peak`), and of the process
    alone (`peak_own`: without the short-lived children a server starts, such as git)."""

    def __init__(self, pid: int, every: float = 0.05):
        self.pid, self.every, self.peak, self.idle = pid, every, 0, tree_rss(pid)
        self.peak_own, self.idle_own = 0, rss(pid)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def _run(self):
        while not self._stop.is_set():
            self.peak_own = max(self.peak_own, rss(self.pid))
            self.peak = max(self.peak, tree_rss(self.pid))
            self._stop.wait(self.every)


def download(url: str) -> tuple[int, str, float, float, float]:
    """(status, sha256 of the body, start, end, time its first body byte arrived) of one GET, read
    1 MB at a time (times from time.time(), comparable across processes of this machine)."""
    started = time.time()
    parts = urlsplit(url)
    if parts.hostname is None:
        raise ValueError(f"no host in {url}")
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=600)
    try:
        conn.request("GET", parts.path)
        response = conn.getresponse()
        if response.status != 200:
            return response.status, "", started, time.time(), time.time()
        digest, buffer = hashlib.sha256(), bytearray(1 << 20)
        view = memoryview(buffer)
        n = response.readinto(view[:1])  # the first byte alone, to time it
        first = time.time()
        digest.update(view[:n])
        while n := response.readinto(buffer):
            digest.update(view[:n])
        return 200, digest.hexdigest(), started, time.time(), first
    finally:
        conn.close()


def client_process(url: str, threads: int) -> list[tuple[int, str, float, float, float]]:
    with ThreadPoolExecutor(threads) as pool:
        return list(pool.map(download, [url] * threads))


def run_clients(url: str, clients: int, processes: int) -> tuple[float, list[tuple[int, str, float, float, float]]]:
    """Every result, and the seconds from the first request's start to the last one's end."""
    per = [clients // processes + (i < clients % processes) for i in range(processes)]
    with multiprocessing.get_context("spawn").Pool(processes) as pool:
        results = [r for batch in pool.starmap(client_process, [(url, n) for n in per if n]) for r in batch]
    return max(r[3] for r in results) - min(r[2] for r in results), results


def wait_until_up(url: str, child: subprocess.Popen) -> None:
    parts = urlsplit(url)
    if parts.hostname is None:
        raise ValueError(f"no host in {url}")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if child.poll() is not None:
            raise SystemExit(f"server exited with {child.returncode}")
        try:
            conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=2)
            conn.request("HEAD", parts.path)
            conn.getresponse().read()
            conn.close()
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"no answer from {url}")


def measure(name: str, command: list[str], url: str, args, sha: str, size: int) -> dict:
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_until_up(url, child)
        with PeakSampler(child.pid) as rss:
            seconds, results = run_clients(url, args.clients, args.processes)
        ok = sum(status == 200 and got == sha for status, got, *_ in results)
        row = {"server": name, "clients": args.clients, "file_bytes": size, "verified": ok,
               "seconds": round(seconds, 2), "throughput_mb_s": round(ok * size / seconds / 1e6, 1),
               "idle_rss_mb": round(rss.idle / 1e6, 1), "peak_rss_mb": round(rss.peak / 1e6, 1)}
        print(json.dumps(row), flush=True)
        return row
    finally:
        child.terminate()
        child.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--size-mb", type=int, default=200)
    parser.add_argument("--processes", type=int, default=4, help="client processes the clients are spread over")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    size = args.size_mb << 20
    with tempfile.TemporaryDirectory(prefix="kbuild-hub-load-") as tmp_name:
        tmp = Path(tmp_name)
        (tmp / "static").mkdir()
        plain = tmp / "static" / "data.bin"
        sha = make_file(plain, size)
        store = GitStore(tmp / "hub")
        store.create_repo("kernel", "org/load")
        store.commit("kernel", "org/load", "main", add=[FileAdd("data.bin", plain)], message="load", parent=None)
        hub_port, static_port = free_port(), free_port()
        rows = [
            measure("kbuild hub serve", [sys.executable, "-m", "builder.commands.main", "hub", "serve", "--root",
                                         str(tmp / "hub"), "--port", str(hub_port), "--max-connections-per-client",
                                         str(args.clients + 8)],
                    f"http://127.0.0.1:{hub_port}/kernels/org/load/resolve/main/data.bin", args, sha, size),
            measure("starlette StaticFiles", [sys.executable, "-c", STATIC, str(tmp / "static"), str(static_port)],
                    f"http://127.0.0.1:{static_port}/data.bin", args, sha, size),
        ]
    if args.out:
        args.out.write_text(json.dumps({"cores": os.cpu_count(), "runs": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
