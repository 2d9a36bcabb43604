"""Scale-out benchmark (issue 13): the first-party matrix (`kbuild build --all`) built cold on one
"machine", as two CI slices side by side, and distributed to two sccache-dist build servers.

    .venv/bin/python bench/scale.py [--kernels activation rmsnorm rotary] [--jobs N]
        [--cores-per-machine K] [--out FILE.json]

All three run on this host, each on fresh copies of build.toml + kernels/* with empty compile
caches (toolchains come from $KBUILD_TOOLCHAINS, provisioned before the first figure):
- one: `kbuild build <ws> --all -j N` (ccache on, empty): the baseline;
- slices: `kbuild matrix --slices 2`, then both slices at once, each in its own copy with its own
  cache (`kbuild build --variant …`), as two CI runners would: wall time of the slower;
- dist: `kbuild build <ws> --all --dist` against a scheduler and two build servers on 127.0.0.1
  (tests/sccache_dist.py; root and bubblewrap needed), -j 2N.
Without --cores-per-machine the "machines" share this host's cores, so on a small host the ratios
show the overhead of each set-up rather than a speed-up. With it, each machine is K cores of the
host (taskset): one machine = cores 0..K-1; slice i and build server i = the i-th K cores (the
distributed build's client shares the first); -j follows K. Prints a table and writes JSON (--out).
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
sys.path.insert(0, str(REPO / "tests"))
from sccache_dist import sccache_dist  # noqa: E402

KBUILD = [sys.executable, "-m", "builder.cli"]


def workspace(dest: Path, kernels: list[str]) -> Path:
    dest.mkdir(parents=True)
    (dest / "build.toml").write_text('[workspace]\nmembers = ["kernels/*"]\n')
    for name in kernels:
        shutil.copytree(REPO / "kernels" / name, dest / "kernels" / name,
                        ignore=shutil.ignore_patterns("build", ".kbuild", "__pycache__"))
    git = ["git", "-c", "user.email=b@localhost", "-c", "user.name=bench"]
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"], [*git, "commit", "-qm", "ws"]):
        subprocess.run(cmd, cwd=dest, check=True)
    return dest


def env_for(cache: Path, **extra: str) -> dict[str, str]:
    env = {**os.environ, "KBUILD_CACHE": str(cache), "CI": "1", "PYTHONPATH": str(REPO), **extra}
    for name in ("CCACHE_DIR", "KBUILD_REMOTE_CACHE", "KBUILD_DIST_SCHEDULER"):
        env.pop(name, None)
    return env


def start(args: list[str], env: dict[str, str], cpus: str | None = None) -> subprocess.Popen:
    pin = ["taskset", "-c", cpus] if cpus else []
    return subprocess.Popen([*pin, *KBUILD, *args], env=env, cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def finish(child: subprocess.Popen, what: str) -> str:
    out, _ = child.communicate()
    if child.returncode != 0:
        sys.exit(f"{what} failed:\n{out[-4000:]}")
    return out


def built(output: str) -> int:
    return len(re.findall(r"^built\s+\S+", output, re.M))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", nargs="+", default=["activation", "rmsnorm", "rotary"])
    parser.add_argument("--jobs", type=int, default=None, help="ninja -j per machine (default: its cores)")
    parser.add_argument("--cores-per-machine", type=int, default=None, metavar="K",
                        help="make each machine K cores of this host (taskset); needs 2K cores")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "scale_results.json")
    args = parser.parse_args()
    k = args.cores_per_machine
    if k is not None and 2 * k > len(os.sched_getaffinity(0)):
        sys.exit(f"--cores-per-machine {k}: two machines need {2 * k} cores, this host has "
                 f"{len(os.sched_getaffinity(0))}")
    machine = [f"{i * k}-{(i + 1) * k - 1}" for i in range(2)] if k else [None, None]
    args.jobs = args.jobs or k or os.cpu_count() or 2
    j = str(args.jobs)
    rows = {}
    with tempfile.TemporaryDirectory(prefix="kbuild-scale-") as tmp:
        root = Path(tmp)
        # provisioning, not measured: every toolchain the matrix needs is installed before any figure
        ws = workspace(root / "warm", args.kernels)
        finish(start(["build", str(ws), "--all", "--no-cache", "-j", j], env_for(root / "warm-cache")), "warm-up")

        ws = workspace(root / "one", args.kernels)
        t = time.perf_counter()
        out = finish(start(["build", str(ws), "--all", "-j", j], env_for(root / "one-cache"), machine[0]),
                     "one machine")
        rows["one"] = {"seconds": round(time.perf_counter() - t, 1), "variants": built(out)}

        plan = finish(start(["matrix", str(ws), "--slices", "2", "--json"], env_for(root / "one-cache")), "matrix")
        slices = json.loads(plan[plan.index("["):])
        runners, t = [], time.perf_counter()
        for i, s in enumerate(slices, 1):
            copy = workspace(root / f"slice{i}", args.kernels)
            names = [a for v in s["variants"] for a in ("--variant", v)]
            runners.append(start(["build", str(copy), *names, "-j", j], env_for(root / f"slice{i}-cache"),
                                 machine[i - 1]))
        outs = [finish(r, f"slice {i}") for i, r in enumerate(runners, 1)]
        rows["slices"] = {"seconds": round(time.perf_counter() - t, 1), "variants": sum(map(built, outs)),
                          "slices": [s["variants"] for s in slices], "estimates": [s["estimate"] for s in slices]}

        with sccache_dist(root / "cluster", servers=2, cpus=machine if k else None) as cluster:
            ws = workspace(root / "dist", args.kernels)
            t = time.perf_counter()
            out = finish(start(["build", str(ws), "--all", "--dist", cluster.url, "-j", str(2 * args.jobs)],
                               env_for(root / "dist-cache", KBUILD_DIST_TOKEN=cluster.token), machine[0]), "dist")
            line = re.search(r"distributed compiles: .*", out)
            rows["dist"] = {"seconds": round(time.perf_counter() - t, 1), "variants": built(out),
                            "summary": line[0] if line else None}
    for name in ("slices", "dist"):
        rows[name]["ratio_to_one"] = round(rows[name]["seconds"] / rows["one"]["seconds"], 3)
    result = {"kernels": args.kernels, "jobs": args.jobs, "cores": os.cpu_count(), "cores_per_machine": k, **rows}
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"one machine (--all -j {j}):        {rows['one']['seconds']:7.1f} s  {rows['one']['variants']} variants")
    print(f"two slices side by side:         {rows['slices']['seconds']:7.1f} s  "
          f"ratio {rows['slices']['ratio_to_one']:.2f}")
    print(f"distributed, 2 sccache-dist servers: {rows['dist']['seconds']:7.1f} s  ratio {rows['dist']['ratio_to_one']:.2f}")
    print(f"  {rows['dist']['summary']}")


if __name__ == "__main__":
    main()
