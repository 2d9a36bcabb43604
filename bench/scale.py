"""Scale-out benchmark (issue 13): the first-party matrix (`kbuild build --all`) built cold on one
"machine", as two CI slices side by side, and distributed to two sccache-dist build servers.

    .venv/bin/python bench/scale.py [--kernels activation rmsnorm rotary] [--jobs N]
        [--cores-per-machine K] [--torch 2.11 ...] [--cuda 13.0 ...] [--setups one slices dist]
        [--out FILE.json]

All three run on this host, each on fresh copies of build.toml + kernels/* with empty compile
caches (toolchains come from $KBUILD_TOOLCHAINS, provisioned before the first figure):
- one: `kbuild build <ws> --all -j N` (ccache on, empty): the baseline;
- slices: `kbuild matrix --slices 2`, then both slices at once, each in its own copy with its own
  cache (`kbuild build --variant …`), as two CI runners would: wall time of the slower;
- dist: `kbuild build <ws> --all --dist` against a scheduler and two build servers on 127.0.0.1
  (tests/sccache_dist.py; root and bubblewrap needed), -j 2N.
Without --cores-per-machine the "machines" share this host's cores, so on a small host the ratios
show the overhead of each set-up rather than a speed-up. With it, each machine is K of the cores
this run may use (taskset; run it under `taskset -c LIST` to leave others free): one machine = the
first K; slice i and build server i = the i-th K (the distributed build's client shares the
first); -j follows K. --torch/--cuda narrow the matrix (the workspace's [workspace.matrix]) to
toolchains at hand, e.g. a machine without internet whose only torch is 2.11. Prints a table and
writes JSON (--out).
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
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "helpers"))
from sccache_dist import sccache_dist  # noqa: E402

KBUILD = [sys.executable, "-m", "builder.commands.main"]


def workspace(dest: Path, kernels: list[str], matrix: dict[str, list[str]]) -> Path:
    dest.mkdir(parents=True)
    table = "".join(f"{key} = {json.dumps(names)}\n" for key, names in matrix.items() if names)
    (dest / "build.toml").write_text('[workspace]\nmembers = ["kernels/*"]\n'
                                     + (f"\n[workspace.matrix]\n{table}" if table else ""))
    for name in kernels:
        shutil.copytree(REPO / "kernels" / name, dest / "kernels" / name,
                        ignore=shutil.ignore_patterns("build", ".kbuild", "__pycache__"))
    git = ["git", "-c", "user.email=b@localhost", "-c", "user.name=bench"]
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"], [*git, "commit", "-qm", "ws"]):
        subprocess.run(cmd, cwd=dest, check=True)
    return dest


def env_for(cache: Path, **extra: str) -> dict[str, str]:
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))  # keep carried packages
    env = {**os.environ, "KBUILD_CACHE": str(cache), "CI": "1", "PYTHONPATH": path, **extra}
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


def machines(k: int | None) -> list[str | None]:
    """taskset lists of the two machines: the first and second K of the cores this run may use."""
    if k is None:
        return [None, None]
    cores = sorted(os.sched_getaffinity(0))
    if 2 * k > len(cores):
        sys.exit(f"--cores-per-machine {k}: two machines need {2 * k} cores, this run may use {len(cores)}")
    return [",".join(map(str, cores[i * k:(i + 1) * k])) for i in range(2)]


SETUPS = ("one", "slices", "dist")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", nargs="+", default=["activation", "rmsnorm", "rotary"])
    parser.add_argument("--jobs", type=int, default=None, help="ninja -j per machine (default: its cores)")
    parser.add_argument("--cores-per-machine", type=int, default=None, metavar="K",
                        help="make each machine K of the cores this run may use (taskset); needs 2K")
    parser.add_argument("--torch", nargs="+", default=[], metavar="X.Y",
                        help="the matrix's torch releases (default: builder/versions.toml's [default])")
    parser.add_argument("--cuda", nargs="+", default=[], metavar="X.Y", help="the matrix's CUDA versions (likewise)")
    parser.add_argument("--setups", nargs="+", default=list(SETUPS), choices=SETUPS,
                        help="which set-ups to time besides `one` (the baseline, always timed); dist needs root "
                             "and a working bubblewrap")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "scale_results.json")
    args = parser.parse_args()
    k = args.cores_per_machine
    machine = machines(k)
    matrix = {"torch": args.torch, "cuda": args.cuda}
    args.jobs = args.jobs or k or os.cpu_count() or 2
    j = str(args.jobs)
    rows: dict[str, dict[str, Any]] = {}  # set-up: its figures (seconds, variants, ...)

    def save() -> None:  # after each set-up: a later one that fails (say, no bubblewrap) keeps the figures
        for name in rows.keys() - {"one"}:
            rows[name]["ratio_to_one"] = round(rows[name]["seconds"] / rows["one"]["seconds"], 3)
        result = {"kernels": args.kernels, "matrix": matrix, "jobs": args.jobs, "cores": os.cpu_count(),
                  "cores_per_machine": k, "machines": machine,
                  # TORCH_CUDA_ARCH_LIST narrows what kbuild compiles
                  "torch_cuda_arch_list": os.environ.get("TORCH_CUDA_ARCH_LIST"), **rows}
        args.out.write_text(json.dumps(result, indent=2) + "\n")

    with tempfile.TemporaryDirectory(prefix="kbuild-scale-") as tmp:
        root = Path(tmp)
        # provisioning, not measured: every toolchain the matrix needs is installed before any figure
        ws = workspace(root / "warm", args.kernels, matrix)
        both = ",".join(m for m in machine if m) or None  # the machines' cores: the rest stay free
        finish(start(["build", str(ws), "--all", "--no-cache", "-j", j], env_for(root / "warm-cache"), both), "warm-up")

        ws = workspace(root / "one", args.kernels, matrix)
        t = time.perf_counter()
        out = finish(start(["build", str(ws), "--all", "-j", j], env_for(root / "one-cache"), machine[0]),
                     "one machine")
        rows["one"] = {"seconds": round(time.perf_counter() - t, 1), "variants": built(out)}
        save()

        if "slices" in args.setups:
            plan = finish(start(["matrix", str(ws), "--slices", "2", "--json"], env_for(root / "one-cache")),
                          "matrix")
            slices = json.loads(plan[plan.index("["):])
            runners, t = [], time.perf_counter()
            for i, s in enumerate(slices, 1):
                copy = workspace(root / f"slice{i}", args.kernels, matrix)
                names = [a for v in s["variants"] for a in ("--variant", v)]
                runners.append(start(["build", str(copy), *names, "-j", j], env_for(root / f"slice{i}-cache"),
                                     machine[i - 1]))
            outs = [finish(r, f"slice {i}") for i, r in enumerate(runners, 1)]
            rows["slices"] = {"seconds": round(time.perf_counter() - t, 1), "variants": sum(map(built, outs)),
                              "slices": [s["variants"] for s in slices], "estimates": [s["estimate"] for s in slices]}
            save()

        if "dist" in args.setups:
            pinned = [m for m in machine if m is not None] if k else None  # each machine's cores when k is given
            with sccache_dist(root / "cluster", servers=2, cpus=pinned) as cluster:
                ws = workspace(root / "dist", args.kernels, matrix)
                t = time.perf_counter()
                out = finish(start(["build", str(ws), "--all", "--dist", cluster.url, "-j", str(2 * args.jobs)],
                                   env_for(root / "dist-cache", KBUILD_DIST_TOKEN=cluster.token), machine[0]),
                             "dist")
                line = re.search(r"distributed compiles: .*", out)
                rows["dist"] = {"seconds": round(time.perf_counter() - t, 1), "variants": built(out),
                                "summary": line[0] if line else None}
    save()
    print(f"one machine (--all -j {j}):        {rows['one']['seconds']:7.1f} s  {rows['one']['variants']} variants")
    if "slices" in rows:
        print(f"two slices side by side:         {rows['slices']['seconds']:7.1f} s  "
              f"ratio {rows['slices']['ratio_to_one']:.2f}")
    if "dist" in rows:
        print(f"distributed, 2 sccache-dist servers: {rows['dist']['seconds']:7.1f} s  "
              f"ratio {rows['dist']['ratio_to_one']:.2f}")
        print(f"  {rows['dist']['summary']}")


if __name__ == "__main__":
    main()
