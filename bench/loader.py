"""Loader benchmark: kbuild's `get_kernel` beside Hugging Face's `kernels` (PyPI), both loading the
same kernel from the same `kbuild hub serve` in one run.

    .venv/bin/python bench/loader.py [--size-mb 20] [--runs 5] [--calls 2000] [--rtt-ms 50]

--rtt-ms puts bench/latency_proxy.py between the loaders and the hub, so a load's round trips cost
what they cost against a distant hub (the Hugging Face Hub is tens of ms away); 0 (default): none.

What it measures (every load runs in a fresh Python process; the server's log counts requests):
  - import cost of each runtime package, without torch (median of --runs);
  - cold load of a --size-mb variant (empty caches): wall time and HTTP requests;
  - the first load in a new process with a warm cache, pinned to the commit and by version:
    wall time and HTTP requests;
  - repeated get_kernel calls in one process with torch imported: median per call.
The kernel is Python-only (torch-noarch) with a --size-mb data file, so it builds in a second.
It prints a Markdown table for bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from latency_proxy import LatencyProxy

ROOT = Path(__file__).resolve().parent.parent
ORG, NAME = "bench", "blob"
REPO = f"{ORG}/{NAME}"

LOAD = """
import json, sys, time
import torch  # the model has imported torch already; not part of the load
which, spec, calls = sys.argv[1], sys.argv[2], int(sys.argv[3])
t = time.perf_counter()
if which == "kbuild":
    import kbuild
    load = lambda: kbuild.get_kernel(spec, trust_remote_code=True)
else:
    import kernels
    repo, _, pin = spec.partition("@")
    pin_kw = {"version": int(pin[1:])} if pin.startswith("v") else {"revision": pin}
    load = lambda: kernels.get_kernel(repo, trust_remote_code=True, check_arch=False, **pin_kw)
imported = time.perf_counter() - t
t = time.perf_counter(); module = load(); first = time.perf_counter() - t
times = []
for _ in range(calls):
    t = time.perf_counter(); again = load(); times.append(time.perf_counter() - t)
    assert again is module
print(json.dumps({"first": first, "imported": imported, "again": sorted(times)[len(times) // 2] if times else None,
                  "file": module.__file__}))
"""
IMPORT = "import time, sys; t = time.perf_counter(); import {mod}; d = time.perf_counter() - t; " \
         "from {mod} import get_kernel; e = time.perf_counter() - t; print(d, e, 'torch' in sys.modules)"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size-mb", type=int, default=20)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--calls", type=int, default=2000)
    p.add_argument("--rtt-ms", type=float, default=0.0,
                   help="round trip the loaders see to the hub (a proxy holds each byte half of it each way)")
    p.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = p.parse_args()
    if args.rtt_ms < 0:
        p.error(f"--rtt-ms: expected a number of milliseconds >= 0, got {args.rtt_ms:g}")
    work = Path(tempfile.mkdtemp(prefix="kbuild-bench-"))
    server = None
    try:
        server, url, log = start_server(work)
        sha = publish_kernel(work, url, args.size_mb)
        with contextlib.ExitStack() as stack:
            if args.rtt_ms:
                host, port = url.removeprefix("http://").rsplit(":", 1)
                url = stack.enter_context(LatencyProxy(host, int(port), args.rtt_ms)).url
            env = loader_env(work, url)
            rows = {loader: measure(loader, env, work, log, sha, args) for loader in ("kbuild", "kernels")}
        print(render(rows, args, sha))
    finally:
        if server is not None:
            server.terminate()
            server.wait(10)
        if args.keep:
            print(f"kept {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0


# -- setup -----------------------------------------------------------------------------------------

def start_server(work: Path, trusted: str = ORG):
    """`kbuild hub serve` as a user runs it (`trusted`: the org it marks trusted); every request
    is one line of its log."""
    port = free_port()
    log = work / "server.log"
    root = work / "hub"
    root.mkdir()
    server = subprocess.Popen([sys.executable, "-m", "builder.commands.main", "hub", "serve", "--root", str(root),
                               "--port", str(port), "--trusted-org", trusted], cwd=ROOT,
                              stdout=subprocess.DEVNULL, stderr=open(log, "w"))
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if time.time() > deadline or server.poll() is not None:
                raise RuntimeError(f"kbuild hub serve did not start:\n{log.read_text()}") from None
            time.sleep(0.1)
    return server, url, log


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def publish_kernel(work: Path, url: str, size_mb: int) -> str:
    """A Python-only kernel with a size_mb data file, built and published to v1; the commit."""
    src = work / "blob"
    pkg = src / "torch-ext" / "blob"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("from ._ops import ops\n\n\ndef double(x):\n    return x * 2\n\n\n"
                                     "__all__ = [\"double\"]\n")
    (pkg / "weights.bin").write_bytes(os.urandom(size_mb << 20))
    (src / "build.toml").write_text(f'[general]\nname = "blob"\nversion = 1\nedition = 5\nlicense = "Apache-2.0"\n'
                                    f'backends = ["cpu", "cuda"]\n\n[general.hub]\nrepo-id = "{REPO}"\n\n'
                                    '[torch-noarch]\npyext = ["py", "bin"]\n')
    (src / ".gitignore").write_text("build/\n.kbuild/\n")
    git = ["git", "-c", "user.name=bench", "-c", "user.email=bench@localhost"]
    for cmd in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "bench kernel"]):
        subprocess.run(git + cmd, cwd=src, check=True)
    token = (work / "hub" / ".token").read_text().split()[0]
    env = {**os.environ, "HF_TOKEN": token, "KBUILD_CACHE": str(work / "build-cache")}
    for cmd in (["build", str(src)], ["publish", str(src), "--hub", url, "--json"]):
        done = subprocess.run([sys.executable, "-m", "builder.commands.main", *cmd], cwd=ROOT, env=env,
                              capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError(f"kbuild {cmd[0]} failed:\n{done.stdout}\n{done.stderr}")
    return json.loads(done.stdout[done.stdout.index("{"):])["commit"]


def loader_env(work: Path, url: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KBUILD_", "HF_", "KERNELS_"))}
    return {**env, "HF_ENDPOINT": url, "KBUILD_HUB": url, "KBUILD_CACHE": str(work / "kbuild-cache"),
            "HF_HOME": str(work / "hf-home"), "HF_HUB_DISABLE_PROGRESS_BARS": "1",
            "PYTHONPATH": str(ROOT)}


# -- measuring -------------------------------------------------------------------------------------

def measure(loader: str, env: dict, work: Path, log: Path, sha: str, args) -> dict:
    mod = "kbuild" if loader == "kbuild" else "kernels"
    imports = [run_python(IMPORT.format(mod=mod), env).split() for _ in range(args.runs)]
    row = {"import_ms": ms(statistics.median(float(i[0]) for i in imports)),
           "import_get_ms": ms(statistics.median(float(i[1]) for i in imports)),
           "import_torch": imports[0][2] == "True"}
    cold = []
    for _ in range(args.runs):
        for cache in ("kbuild-cache", "hf-home"):
            shutil.rmtree(work / cache, ignore_errors=True)
        cold.append(load(loader, f"{REPO}@v1", env, log, calls=0))
    row["cold_ms"] = ms(statistics.median(c["first"] for c in cold))
    row["cold_total_ms"] = ms(statistics.median(c["first"] + c["imported"] for c in cold))
    row["cold_requests"] = cold[-1]["requests"]
    # HF's loader asks the hub on every call, ~100 ms each here: fewer repeats keep the run short.
    calls = args.calls if loader == "kbuild" else min(args.calls, 30)
    for label, spec in (("pinned", f"{REPO}@{sha}"), ("version", f"{REPO}@v1")):
        load(loader, spec, env, log, calls=0)  # make sure this spelling is cached
        warm = [load(loader, spec, env, log, calls=0) for _ in range(args.runs)]
        row[f"{label}_first_ms"] = ms(statistics.median(w["first"] for w in warm))
        row[f"{label}_total_ms"] = ms(statistics.median(w["first"] + w["imported"] for w in warm))
        row[f"{label}_requests"] = warm[-1]["requests"]
        repeated = load(loader, spec, env, log, calls=calls)
        row[f"{label}_again_us"] = repeated["again"] * 1e6
        row[f"{label}_again_requests"] = (len(repeated["requests"]) - len(warm[-1]["requests"])) / calls
    return row


def load(loader: str, spec: str, env: dict, log: Path, calls: int) -> dict:
    before = requests(log)
    result = json.loads(run_python(LOAD, env, loader, spec, str(calls)).splitlines()[-1])
    time.sleep(0.2)  # the server logs a request after answering it
    result["requests"] = requests(log)[len(before):]
    return result


def requests(log: Path) -> list[str]:
    """The server's request lines, without huggingface_hub's telemetry probe: both loaders send
    `GET /api/agent-harnesses` once per process (huggingface_hub 2.4 caches the answer for a day,
    but `kbuild hub serve` answers 404, so it is asked again by every process)."""
    return [line for line in log.read_text().splitlines()
            if line.split(" ")[0] in ("GET", "HEAD", "POST") and "/api/agent-harnesses" not in line]


def run_python(code: str, env: dict, *argv: str) -> str:
    done = subprocess.run([sys.executable, "-c", code, *argv], env=env, cwd=ROOT, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"benchmark step failed:\n{done.stderr[-3000:]}")
    return done.stdout


def ms(seconds: float) -> float:
    return seconds * 1000


# -- the table -------------------------------------------------------------------------------------

def render(rows: dict, args, sha: str) -> str:
    import huggingface_hub
    import kernels
    import torch

    k, h = rows["kbuild"], rows["kernels"]
    lines = [
        f"Loader benchmark ({args.size_mb} MB variant `torch-cuda`, medians of {args.runs} runs; torch "
        f"{torch.__version__}, huggingface_hub {huggingface_hub.__version__}, kernels {kernels.__version__}; "
        f"one `kbuild hub serve` on 127.0.0.1"
        f"{f', {args.rtt_ms:g} ms round trip away (bench/latency_proxy.py)' if args.rtt_ms else ''}; "
        "every load in a fresh process):",
        "",
        "| measure | target | kbuild | HF `kernels` |",
        "|---|---|---|---|",
        f"| `import` of the runtime package, no torch | ≤ 50 ms | {k['import_ms']:.1f} ms"
        f"{' (imports torch)' * k['import_torch']} | {h['import_ms']:.1f} ms{' (imports torch)' * h['import_torch']} |",
        f"| … then `from … import get_kernel` (total) | | {k['import_get_ms']:.1f} ms | {h['import_get_ms']:.1f} ms |",
        f"| cold load, empty cache (`@v1`): `get_kernel` | ≤ 1 s | {k['cold_ms']:.0f} ms | {h['cold_ms']:.0f} ms |",
        f"| cold load, import of the loader included | | {k['cold_total_ms']:.0f} ms | {h['cold_total_ms']:.0f} ms |",
        f"| HTTP requests, cold load | | {len(k['cold_requests'])} | {len(h['cold_requests'])} |",
        f"| first `get_kernel` in a new process, warm cache, pinned to the commit | | {k['pinned_first_ms']:.1f} ms"
        f" | {h['pinned_first_ms']:.1f} ms |",
        f"| … import of the loader included | | {k['pinned_total_ms']:.1f} ms | {h['pinned_total_ms']:.1f} ms |",
        f"| HTTP requests, warm pinned load | 0 | {len(k['pinned_requests'])} | {len(h['pinned_requests'])} |",
        f"| first `get_kernel` in a new process, warm cache, `@v1` | | {k['version_first_ms']:.1f} ms | "
        f"{h['version_first_ms']:.1f} ms |",
        f"| … import of the loader included | | {k['version_total_ms']:.1f} ms | {h['version_total_ms']:.1f} ms |",
        f"| HTTP requests, warm `@v1` load | ≤ 1 | {len(k['version_requests'])} | {len(h['version_requests'])} |",
        f"| repeated `get_kernel` in one process (pinned) | ≤ 2 ms | {k['pinned_again_us']:.0f} µs | "
        f"{h['pinned_again_us']:.0f} µs |",
        f"| repeated `get_kernel` in one process (`@v1`) | | {k['version_again_us']:.0f} µs | "
        f"{h['version_again_us']:.0f} µs |",
        f"| HTTP requests per repeated call (pinned / `@v1`) | | {k['pinned_again_requests']:g} / "
        f"{k['version_again_requests']:g} | {h['pinned_again_requests']:g} / {h['version_again_requests']:g} |",
        "",
        "Requests of one cold load (huggingface_hub's once-per-process `GET /api/agent-harnesses` telemetry "
        "probe, sent by both, left out):",
        "",
    ]
    for name, row in (("kbuild", k), ("HF kernels", h)):
        lines.append(f"- {name}: " + ", ".join(_short(r, sha) for r in row["cold_requests"]))
    lines.append("")
    lines.append("Requests of one warm `@v1` load: " + "; ".join(
        f"{name}: {', '.join(_short(r, sha) for r in row['version_requests']) or 'none'}"
        for name, row in (("kbuild", k), ("HF kernels", h))))
    return "\n".join(lines)


def _short(line: str, sha: str) -> str:
    method, path = line.split(" ")[:2]
    return f"`{method} {path.split('?')[0].replace(sha, '<sha>').replace(REPO, '<repo>')}`"


if __name__ == "__main__":
    sys.exit(main())
