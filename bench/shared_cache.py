"""Shared compile cache benchmark (issue 13): the first-party kernels built cold on "machine 1",
then a fresh copy built on "machine 2" that shares only the Redis server behind ccache's remote
storage.

    .venv/bin/python bench/shared_cache.py [--kernels activation rmsnorm rotary] [--jobs N] [--out FILE.json]

Both machines are folders of this host, each with its own KBUILD_CACHE (so machine 2 starts with
an empty local compile cache and no torch probes: what a new CI runner has), and a copy of
build.toml + kernels/* made without build/ or .kbuild/. Machine 1 builds with KBUILD_REMOTE_CACHE
naming a real redis-server on 127.0.0.1 (Debian's, as ci/setup.sh installs it) and fills it;
machine 2 builds the same variants (this environment's: `kbuild build` with no flags) with the
same setting. Reported: both wall times (the whole `kbuild build` process), the ratio (target
<= 0.1x), the compile cache line of each, and the server's entry count. A third figure, machine 2
again with the remote cache off, shows what the hits saved.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "helpers"))
from redis_server import keys, redis_server  # noqa: E402

KBUILD = [sys.executable, "-m", "builder.commands.main"]


def copy_workspace(dest: Path, kernels: list[str]) -> Path:
    ignore = shutil.ignore_patterns("build", ".kbuild", "__pycache__")
    dest.mkdir(parents=True)
    (dest / "build.toml").write_text('[workspace]\nmembers = ["kernels/*"]\n')
    for name in kernels:
        shutil.copytree(REPO / "kernels" / name, dest / "kernels" / name, ignore=ignore)
    subprocess.run(["git", "init", "-q"], cwd=dest, check=True)  # sources identified by git, as in a checkout
    subprocess.run(["git", "add", "-A"], cwd=dest, check=True)
    subprocess.run(["git", "-c", "user.email=b@localhost", "-c", "user.name=bench", "commit", "-qm", "ws"],
                   cwd=dest, check=True)
    return dest


def timed_build(folder: Path, machine: Path, remote: str, jobs: int) -> dict:
    env = {**os.environ, "KBUILD_CACHE": str(machine), "KBUILD_REMOTE_CACHE": remote, "CI": "1",
           "PYTHONPATH": str(REPO)}
    env.pop("CCACHE_DIR", None)
    start = time.perf_counter()
    done = subprocess.run([*KBUILD, "build", str(folder), "-j", str(jobs)], env=env, capture_output=True,
                          text=True, cwd=REPO)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"kbuild build {folder} failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    line = re.search(r"compile cache: .*", done.stdout + done.stderr)
    built = re.findall(r"^(?:built|unchanged)\s+(\S+)", done.stdout + done.stderr, re.M)
    return {"seconds": round(seconds, 2), "cache": line[0] if line else None, "variants": built}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", nargs="+", default=["activation", "rmsnorm", "rotary"])
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "shared_cache_results.json")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kbuild-shared-cache-") as tmp:
        root = Path(tmp)
        with redis_server(root / "redis") as url:
            first = timed_build(copy_workspace(root / "m1" / "ws", args.kernels), root / "m1" / "cache", url,
                                args.jobs)
            entries = keys(url)
            second = timed_build(copy_workspace(root / "m2" / "ws", args.kernels), root / "m2" / "cache", url,
                                 args.jobs)
            alone = timed_build(copy_workspace(root / "m3" / "ws", args.kernels), root / "m3" / "cache", "off",
                                args.jobs)
    ratio = second["seconds"] / first["seconds"]
    result = {"kernels": args.kernels, "jobs": args.jobs, "cores": os.cpu_count(), "server_entries": entries,
              "machine1_cold": first, "machine2_shared": second, "machine2_unshared": alone,
              "ratio_shared_over_cold": round(ratio, 3), "target": 0.1}
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"machine 1, cold, fills the server: {first['seconds']:7.1f} s  {first['cache']}")
    print(f"machine 2, shared cache:           {second['seconds']:7.1f} s  {second['cache']}")
    print(f"machine 2, remote cache off:       {alone['seconds']:7.1f} s  {alone['cache']}")
    print(f"ratio shared / cold: {ratio:.3f} (target <= 0.1); {entries} entries on the server; "
          f"{len(second['variants'])} variants")


if __name__ == "__main__":
    main()
