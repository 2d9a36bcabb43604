"""Hub benchmark: publish and download through the local hub and `kbuild hub serve`.

    .venv/bin/python bench/hub.py [--files 200] [--mb 50] [--download-mb 20] [--clients 16]

Each figure comes with a baseline measured in the same run on the same data:
- publish 200 files / 50 MB with `kbuild publish` to a local hub  vs  `git add/commit/push` of
  the same files into a bare repo;
- the same publish through `kbuild hub serve`  vs  huggingface_hub's `upload_folder` of the same
  folder to the same server;
- `snapshot_download` of one 20 MB variant, cold cache  vs  one plain HTTP GET of its bytes;
- 16 concurrent `snapshot_download`s, every byte checked against metadata.json's digest.
Prints a table and writes JSON to bench/hub_results.json.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
KBUILD = [sys.executable, "-m", "builder.commands.main"]
GIT_ENV = {**os.environ, "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "bench",
           "GIT_COMMITTER_EMAIL": "b@b"}


def sh(*cmd, cwd=None, env=None) -> str:
    return subprocess.run(cmd, cwd=cwd, env=env or GIT_ENV, check=True, capture_output=True, text=True).stdout


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def make_kernel(root: Path, name: str, files: int, total_mb: float) -> Path:
    """A Python-only kernel whose package carries `files` data files, committed to git."""
    project = root / name
    package = project / "torch-ext" / name.replace("-", "_") / "data"
    package.mkdir(parents=True)
    (package.parent / "__init__.py").write_text("from ._ops import ops\n__all__ = []\n")
    size = int(total_mb * 2**20) // files
    for i in range(files):
        (package / f"blob{i:03d}.bin").write_bytes(os.urandom(size))
    (project / "build.toml").write_text(
        f'[general]\nname = "{name}"\nversion = 1\nedition = 5\nlicense = "MIT"\nbackends = ["cpu"]\n'
        '[torch-noarch]\npyext = ["py", "bin"]\n')
    (project / ".gitignore").write_text("build/\n.kbuild/\n")
    sh("git", "init", "-q", "-b", "main", cwd=project)
    sh("git", "add", "-A", cwd=project)
    sh("git", "commit", "-q", "-m", "bench", cwd=project)
    sh(*KBUILD, "build", str(project), cwd=REPO)
    return project


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(root: Path, token_file: Path, log: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    # The server logs one line per request: to a file, so a full pipe never blocks it.
    # Every client here is 127.0.0.1: the per-address cap (64) would reset the 16 clients' ~128
    # connections, which on a real network come from 16 addresses.
    server = subprocess.Popen([*KBUILD, "hub", "serve", "--root", str(root), "--port", str(port),
                               "--token-file", str(token_file), "--max-connections-per-client", "256"],
                              cwd=REPO, stdout=subprocess.DEVNULL,
                              stderr=log.open("w"))
    url = f"http://127.0.0.1:{port}"
    for _ in range(100):
        try:
            urllib.request.urlopen(f"{url}/api/whoami-v2", timeout=1)
        except urllib.error.HTTPError:
            return server, url  # answering (401 without a token)
        except OSError:
            time.sleep(0.1)
    server.kill()
    raise RuntimeError(f"kbuild hub serve did not start: {log.read_text()[-2000:]}")


def bench_local_publish(work: Path, project: Path) -> dict:
    hub = work / "local-hub"
    ours = timed(lambda: sh(*KBUILD, "publish", str(project), "--repo-id", "bench/big", "--hub", str(hub), cwd=REPO))
    bare = work / "baseline.git"
    sh("git", "init", "-q", "--bare", str(bare))
    clone = work / "baseline-clone"

    def baseline():
        sh("git", "clone", "-q", str(bare), str(clone))
        sh("cp", "-r", str(project / "build"), str(clone / "build"))
        sh("git", "add", "-A", cwd=clone)
        sh("git", "commit", "-q", "-m", "x", cwd=clone)
        sh("git", "push", "-q", "origin", "HEAD:v1", cwd=clone)

    base = timed(baseline)
    return {"kbuild_publish_local_s": ours, "git_push_baseline_s": base, "ratio": ours / base}


def bench_server_publish(url: str, token: str, project: Path) -> dict:
    from huggingface_hub import HfApi

    env = {**os.environ, "HF_TOKEN": token}
    ours = timed(lambda: sh(*KBUILD, "publish", str(project), "--repo-id", "bench/big", "--hub", url,
                            cwd=REPO, env=env))
    api = HfApi(endpoint=url, token=token)
    api.create_repo("bench/baseline", repo_type="kernel")
    base = timed(lambda: api.upload_folder(repo_id="bench/baseline", repo_type="kernel",
                                           folder_path=project / "build", path_in_repo="build"))
    return {"kbuild_publish_http_s": ours, "upload_folder_baseline_s": base, "ratio": ours / base}


def download_variant(url: str, cache: Path) -> Path:
    from huggingface_hub import snapshot_download

    return Path(snapshot_download("bench/dl", repo_type="kernel", revision="v1", endpoint=url, cache_dir=cache,
                                  allow_patterns=["build/torch-cpu/*"]))


def verify(snapshot: Path) -> int:
    variant = snapshot / "build" / "torch-cpu"
    digest = json.loads((variant / "metadata.json").read_text())["digest"]["files"]
    checked = 0
    for rel, expected in digest.items():
        data = (variant / rel).read_bytes()
        if base64.b64encode(hashlib.sha256(data).digest()).decode() != expected:
            raise AssertionError(f"{rel}: digest mismatch")
        checked += len(data)
    return checked


def bench_downloads(url: str, token: str, work: Path, project: Path, clients: int) -> dict:
    sh(*KBUILD, "publish", str(project), "--repo-id", "bench/dl", "--hub", url, cwd=REPO,
       env={**os.environ, "HF_TOKEN": token})
    colds = []
    for i in range(3):
        cache = work / f"cold{i}"
        colds.append(timed(lambda c=cache: download_variant(url, c)))
    snapshot = download_variant(url, work / "cold0")
    nbytes = verify(snapshot)
    biggest = max((snapshot / "build" / "torch-cpu").rglob("*.bin"), key=lambda p: p.stat().st_size)
    rel = biggest.relative_to(snapshot).as_posix()
    raw = statistics.median(timed(lambda: urllib.request.urlopen(f"{url}/kernels/bench/dl/resolve/v1/{rel}").read())
                            for _ in range(3))

    def one(i: int) -> int:
        return verify(download_variant(url, work / f"many{i}"))

    start = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        verified = sum(pool.map(one, range(clients)))
    many = time.perf_counter() - start
    return {"variant_mb": nbytes / 2**20, "snapshot_download_cold_median_s": statistics.median(colds),
            "raw_get_of_largest_file_s": raw, "largest_file_mb": biggest.stat().st_size / 2**20,
            "concurrent_clients": clients, "concurrent_wall_s": many, "verified_mb": verified / 2**20,
            "concurrent_MBps": verified / 2**20 / many}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--mb", type=float, default=50)
    parser.add_argument("--download-mb", type=float, default=20)
    parser.add_argument("--clients", type=int, default=16)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    with tempfile.TemporaryDirectory(prefix="kbuild-bench-") as tmp:
        work = Path(tmp)
        big = make_kernel(work, "big", args.files, args.mb)
        small = make_kernel(work, "dl", 10, args.download_mb)
        results = {"publish_local": bench_local_publish(work, big)}
        token_file = work / "token"
        token_file.write_text("bench-token\n")
        token_file.chmod(0o600)  # hub serve refuses a token file others can read
        server, url = start_server(work / "served-hub", token_file, work / "server.log")
        try:
            results["publish_http"] = bench_server_publish(url, "bench-token", big)
            results["download"] = bench_downloads(url, "bench-token", work, small, args.clients)
        finally:
            server.terminate()
            server.wait(10)
        results["download"]["server_requests_logged"] = sum(1 for _ in (work / "server.log").open()) - 2
    for section, values in results.items():
        print(f"{section}:")
        for key, value in values.items():
            print(f"  {key:36} {value:.3f}" if isinstance(value, float) else f"  {key:36} {value}")
    (Path(__file__).parent / "hub_results.json").write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
