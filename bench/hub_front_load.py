"""Concurrent downloads through `kbuild hub serve --upstream` beside the upstream itself (issue 43,
item 5; docs/upstream.md, "Concurrency and memory").

    python bench/hub_front_load.py [--clients 50] [--size-mb 50] [--out FILE.json]

One file of --size-mb is published to a fresh local hub served by the real `kbuild hub serve` (the
upstream, a subprocess); a second real `kbuild hub serve --upstream <the upstream>` with an empty
root is the front. In one run, --clients GETs of the file's resolve URL (bench/hub_load.py's
clients: processes of threads, every byte hashed and checked against the file's sha256) go

  direct      to the upstream;
  front cold  to the front, the file not yet in its cache: the upstream must see ONE GET of it, and
              the clients' first bytes must come before the upstream has sent the last (streaming);
  front warm  to the front again, the file now cached: no GET of it reaches the upstream.

Each server's peak resident memory (it and its children) is sampled from /proc while the clients
run, the front and the upstream separately. The upstream's GETs are counted from its request log
(one line per request, with its duration: the time the upstream took to send the file). Before
the cold run the front is asked its upstream's organisation card once, so that the front's idle
memory includes its upstream client (huggingface_hub), loaded on its first upstream request.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from hub_load import REPO, PeakSampler, download, free_port, make_file, run_clients, wait_until_up

from kbuild_hub.gitstore import FileAdd, GitStore

REPO_ID, FILE = "org/load", "data.bin"
_LOGGED = re.compile(r"^(?P<method>[A-Z]+) (?P<path>\S+) (?P<status>\d+) (?P<ms>[\d.]+)ms$")


class Server:
    """A `kbuild hub serve` subprocess; its request log (one line per request, written when the
    response ends) is kept with the time each line arrived."""

    def __init__(self, root: Path, clients: int, upstream: str | None = None):
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        command = [sys.executable, "-m", "builder.commands.main", "hub", "serve", "--root", str(root), "--port",
                   str(port), "--max-connections-per-client", str(clients + 8)]
        if upstream:
            command += ["--upstream", upstream]
        self.child = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.lines: list[tuple[float, str]] = []
        threading.Thread(target=self._read, daemon=True).start()
        wait_until_up(self.url + "/", self.child)

    def _read(self) -> None:
        assert self.child.stderr is not None  # started with stderr=PIPE
        for line in self.child.stderr:
            self.lines.append((time.time(), line.rstrip("\n")))

    def requests(self, since: int) -> list[dict]:
        """The requests logged after the first `since` lines: method, path, status, the seconds it
        took (first byte of the request to the last of the response) and when it ended."""
        found = []
        for at, line in self.lines[since:]:
            if m := _LOGGED.match(line):
                found.append({"method": m["method"], "path": m["path"], "status": int(m["status"]),
                              "seconds": float(m["ms"]) / 1000, "ended": at})
        return found

    def stop(self) -> None:
        self.child.terminate()
        self.child.wait(30)


def file_gets(requests: list[dict]) -> list[dict]:
    return [r for r in requests if r["method"] == "GET" and "/resolve/" in r["path"] and r["path"].endswith(f"/{FILE}")]


def measure(name: str, url: str, serving: Server, upstream: Server, args, sha: str, size: int) -> dict:
    """--clients GETs of `url` at once; both servers' memory sampled; the upstream's requests counted."""
    mark = len(upstream.lines)
    with contextlib.ExitStack() as stack:
        rss = stack.enter_context(PeakSampler(serving.child.pid))
        # the direct row's server is the upstream: one sampler of it (two would catch different peaks)
        up_rss = rss if serving is upstream else stack.enter_context(PeakSampler(upstream.child.pid))
        seconds, results = run_clients(url, args.clients, args.processes)
    time.sleep(1.0)  # the log lines of the last responses
    ok = [r for r in results if r[0] == 200 and r[1] == sha]
    per_client = [size / (end - start) / 1e6 for _, _, start, end, _ in ok]
    first_byte = [first - start for _, _, start, _, first in ok]
    requests = upstream.requests(mark)
    gets = file_gets(requests)
    row = {
        "run": name, "clients": args.clients, "file_bytes": size, "verified": len(ok), "seconds": round(seconds, 2),
        "throughput_mb_s": round(len(ok) * size / seconds / 1e6, 1),
        "per_client_mb_s": {"median": round(statistics.median(per_client), 2), "min": round(min(per_client), 2),
                            "max": round(max(per_client), 2)} if ok else None,
        "first_byte_s": {"median": round(statistics.median(first_byte), 3), "min": round(min(first_byte), 3),
                         "max": round(max(first_byte), 3)} if ok else None,
        "serving_rss_mb": memory(rss), "upstream_rss_mb": memory(up_rss),
        "upstream_requests": len(requests),
        "upstream_file_gets": len(gets),
    }
    if serving is not upstream and len(gets) == 1:
        # streaming: how many clients had their first byte before the upstream had sent its last
        get, started = gets[0], min(r[2] for r in results)
        firsts = sorted(r[4] for r in ok)
        row["upstream_get"] = {
            "send_s": round(get["seconds"], 3),
            "ended_after_clients_started_s": round(get["ended"] - started, 3),
            "first_client_byte_after_clients_started_s": round(firsts[0] - started, 3) if firsts else None,
            "clients_with_first_byte_before_it_ended": sum(f < get["ended"] for f in firsts),
        }
    print(json.dumps(row), flush=True)
    return row


def memory(sampled: PeakSampler) -> dict:
    """MB resident: the server with its children (git) and the server process alone."""
    mb = lambda n: round(n / 1e6, 1)  # noqa: E731
    return {"idle": mb(sampled.idle), "peak": mb(sampled.peak), "idle_own": mb(sampled.idle_own),
            "peak_own": mb(sampled.peak_own)}


def ratios(row: dict, direct: dict) -> dict:
    """A front row against the direct row of the same run."""
    mine, theirs = row["serving_rss_mb"], direct["serving_rss_mb"]
    return {"seconds": round(row["seconds"] / direct["seconds"], 2),
            "per_client_mb_s": round(row["per_client_mb_s"]["median"] / direct["per_client_mb_s"]["median"], 2),
            "serving_peak_rss": round(mine["peak"] / theirs["peak"], 2),
            "serving_peak_rss_own": round(mine["peak_own"] / theirs["peak_own"], 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--size-mb", type=int, default=50)
    parser.add_argument("--processes", type=int, default=4, help="client processes the clients are spread over")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    size, load = args.size_mb << 20, os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="kbuild-hub-front-load-") as tmp_name:
        tmp = Path(tmp_name)
        data = tmp / FILE
        sha = make_file(data, size)
        store = GitStore(tmp / "upstream")
        store.create_repo("kernel", REPO_ID)
        store.commit("kernel", REPO_ID, "main", add=[FileAdd(FILE, data)], message="load", parent=None)
        data.unlink()
        upstream = Server(tmp / "upstream", args.clients)
        front = None
        try:
            front = Server(tmp / "front", args.clients, upstream=upstream.url)
            download(f"{front.url}/api/organizations/org/overview")  # loads its upstream client
            path = f"/kernels/{REPO_ID}/resolve/main/{FILE}"
            direct = measure("direct", upstream.url + path, upstream, upstream, args, sha, size)
            cold = measure("front, cold", front.url + path, front, upstream, args, sha, size)
            warm = measure("front, warm", front.url + path, front, upstream, args, sha, size)
        finally:
            if front is not None:
                front.stop()
            upstream.stop()
    for row in (cold, warm):
        row["vs_direct"] = ratios(row, direct)
    doc = {"bench": "hub_front_load", "cores": os.cpu_count(), "load_average_before": [round(x, 2) for x in load],
           "rows": [direct, cold, warm]}
    if args.out:
        args.out.write_text(json.dumps(doc, indent=2) + "\n")


if __name__ == "__main__":
    main()
