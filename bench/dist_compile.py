"""Distributed compilation on a real heavy kernel (issue 34): one fixed set of a kernel's CUDA units
compiled through kbuild's own graph four ways on one host, then a model of the whole release
build on 1, 8 and 64 machines from what was measured.

    python bench/dist_compile.py KERNEL_DIR [--units GLOB ...] [--cuda-archs 9.0a]
        [--machine-cpus 8] [--rows local half dist shared] [--out FILE.json]

The units are the CUDA variant's compile units whose source matches a --units glob (relative to
the kernel folder; the default set is flash-attn2's 16 named below). Each row plans the kernel as
`kbuild build KERNEL --cuda-archs A` does (in a fresh copy of the kernel, in a child process of
its own) and runs kbuild's graph (compile/graph.run_graph) with only those objects as targets:
- local:  every core this run may use, an empty ccache whose remote storage is a redis-server on
          127.0.0.1 (tests/helpers/redis_server.py), which this row fills;
- half:   the first --machine-cpus cores (taskset), an empty ccache, no remote storage;
- dist:   an sccache-dist scheduler and two build servers (tests/helpers/sccache_dist.py:
          bubblewrap, root), server i pinned to the i-th --machine-cpus cores; the client (this
          build) on the same host, unpinned;
- shared: a second "machine": another folder, HOME and KBUILD_CACHE, reading the redis that
          `local` filled.
Reported per row: the compile's wall time, the host's busy CPU seconds (and the build servers'
own, for dist: sampled from /proc), each unit's time from ninja's log, each object's sha256 (and
that of the object linked alone without local symbols, as CUDA libraries are linked), and the compile-cache or
distribution line kbuild printed (with the reasons sccache gave for any unit it did not
distribute). Then the ratios dist/local, dist/half, shared/local, the objects compared between
rows, and the model (bench/dist_model.py). Toolchains come from $KBUILD_TOOLCHAINS for every row
(provisioning is planning, not compiling, and is not timed). Busy CPU is the whole host's: run it on a
host doing nothing else, or the client's share in the model is wrong. Writes JSON (--out), prints a table.
"""

from __future__ import annotations

import argparse
import fnmatch
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import nullcontext
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "helpers"))
from dist_model import model  # noqa: E402

from builder import WORK_DIR, Reporter  # noqa: E402
from builder.commands import build_options  # noqa: E402
from builder.commands import parser as kbuild_parser  # noqa: E402
from builder.compile import run_graph  # noqa: E402
from builder.plan import plan_kernels  # noqa: E402
from redis_server import keys, redis_server  # noqa: E402
from sccache_dist import sccache_dist  # noqa: E402

# flash-attn2's named set: every hdim-128 unit (forward, backward, split-KV; fp16 and bf16; causal
# or not) and the hdim-64 forward ones. About 5 minutes on 16 vCPUs at one arch (corpus runs 5-6:
# the 72 units took 1203-1382 s there), so every row finishes inside a device call.
FLASH_ATTN2_UNITS = ("flash_attn/src/flash_*_hdim128_*.cu", "flash_attn/src/flash_fwd_hdim64_*.cu")
ROWS = ("local", "half", "dist", "shared")
_RESULT = "DIST-COMPILE-RESULT "


# --- one row, in its own process (pinned and with its own HOME by the driver) -----------------

def _worker(spec: dict) -> dict:
    argv = ["build", spec["folder"], "--cuda-archs", spec["archs"], "-j", str(spec["jobs"])]
    options = build_options(kbuild_parser().parse_args(argv + (["--dist", spec["dist"]] if spec.get("dist") else [])))
    reporter = Reporter(plain=True, stream=sys.stderr)
    began = time.monotonic()
    plans, _ = plan_kernels(options, reporter, {})
    planned = time.monotonic() - began
    plans, units = _only_units(plans, spec["globs"], Path(spec["folder"]))
    if not units:
        sys.exit(f"no CUDA unit of {spec['folder']} matches {spec['globs']}")
    began = time.monotonic()
    outcome = run_graph(options, plans, reporter, targets=[str(u.output) for u in units])
    seconds = time.monotonic() - began
    reporter.summary([])  # the compile cache's or the distribution's line, as `kbuild build` prints it
    if outcome is None or outcome.returncode:
        sys.exit(f"the compile failed:\n{outcome.log[-4000:] if outcome else 'nothing to compile'}")
    steps = {str((options.folder / WORK_DIR / out).resolve()) if not os.path.isabs(out) else out: span
             for out, span in outcome.step_times.items()}
    rows = []
    for u in units:
        span = steps.get(str(u.output.resolve()))
        rows.append({"source": u.source.relative_to(Path(spec["folder"])).as_posix(),
                     "seconds": (span[1] - span[0]) / 1000 if span else None,
                     "sha256": hashlib.sha256(u.output.read_bytes()).hexdigest(),
                     "sha256_no_locals": _without_local_symbols(u.output)})
    return {"plan_seconds": round(planned, 2), "compile_seconds": round(seconds, 2), "units": rows,
            "archs": sorted({a for j in plans for v in j.plan.variants for a in v.archs}),
            "not_distributed": _not_distributed(options.folder / WORK_DIR / "sccache" / "client.log")}


def _without_local_symbols(obj: Path) -> str:
    """The sha256 of the object linked alone as a CUDA library is linked (-Wl,--discard-all: no
    local symbols): where sccache named nvcc's intermediate files, only local symbols differ, and
    objcopy cannot drop those that relocations name (the static initializer's)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "alone.so"
        subprocess.run(["c++", "-shared", "-Wl,--discard-all", "-Wl,--build-id=none", str(obj), "-o", str(out)],
                       check=True)
        return hashlib.sha256(out.read_bytes()).hexdigest()


def _only_units(plans, globs: list[str], root: Path):
    """The CUDA variants of `plans` with only the units whose source matches a glob."""
    kept = []
    units: list = []  # the kept units: CompileUnits, a type builder.plan does not offer
    for j in plans:
        variants = []
        for v in j.plan.variants:
            if v.variant.backend != "cuda":
                continue
            mine = tuple(u for u in v.units
                         if any(fnmatch.fnmatch(u.source.relative_to(root).as_posix(), g) for g in globs))
            units += mine
            variants.append(replace(v, units=mine))
        kept.append(replace(j, plan=replace(j.plan, variants=tuple(variants))))
    return kept, units


def _not_distributed(log: Path) -> list[str]:
    """Why sccache compiled anything here rather than on a server: its client log's distinct reasons."""
    if not log.is_file():
        return []
    reasons = set()
    for line in log.read_text(errors="replace").splitlines():
        if re.search(r"(?i)could not (?:perform )?distribut|dist(?:ributed)? compile failed|falling back", line):
            reasons.add(re.sub(r"^\S+\s+\S+\s+", "", line)[:300])
    return sorted(reasons)[:20]


# --- the driver --------------------------------------------------------------------------------

def _copy_kernel(kernel: Path, dest: Path) -> Path:
    shutil.copytree(kernel, dest, ignore=shutil.ignore_patterns("build", ".kbuild", "__pycache__", ".git"))
    git = ["git", "-c", "user.email=b@localhost", "-c", "user.name=bench"]
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"], [*git, "commit", "-qm", "kernel"]):
        subprocess.run(cmd, cwd=dest, check=True)
    return dest


def _busy_seconds() -> float:
    """The host's CPU time spent busy so far (every core: /proc/stat's first line, less idle and iowait)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


class ServerCpu(threading.Thread):
    """CPU seconds spent by the build servers and everything under them (their bubblewrap
    sandboxes and the compilers inside), sampled from /proc twice a second while a row runs: the
    sandboxes' pid namespaces reap the compilers, so a server's own child times never hold them. A
    process's last sample counts (one that lives under half a second may be missed)."""

    def __init__(self, pattern: str):
        super().__init__(daemon=True)
        self.pattern, self.halt = pattern, threading.Event()
        self.seen: dict[int, int] = {}  # pid: its user + system ticks at the last sample

    def run(self) -> None:
        while not self.halt.wait(0.5):
            self.sample()

    def sample(self) -> None:
        procs = {}
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                parts = stat.read_text().rsplit(")", 1)[1].split()
                cmd = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            procs[int(stat.parent.name)] = (int(parts[1]), int(parts[11]) + int(parts[12]), self.pattern in cmd)
        for pid, (parent, ticks, server) in procs.items():
            while not server and parent in procs:  # under a server?
                parent, _, server = procs[parent]
            if server:
                self.seen[pid] = max(ticks, self.seen.get(pid, 0))

    def seconds(self) -> float:
        self.halt.set()
        self.join()
        self.sample()
        return sum(self.seen.values()) / os.sysconf("SC_CLK_TCK")


def _row(name: str, folder: Path, env: dict, spec: dict, cpus: str | None) -> dict:
    pin = ["taskset", "-c", cpus] if cpus else []
    busy = _busy_seconds()
    began = time.monotonic()
    done = subprocess.run([*pin, sys.executable, __file__, "--worker", json.dumps({**spec, "folder": str(folder)})],
                          env=env, cwd=REPO, capture_output=True, text=True)
    wall = time.monotonic() - began
    if done.returncode or _RESULT not in done.stdout:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        sys.exit(f"row {name} failed: {last}\n{done.stdout[-3000:]}{done.stderr[-4000:]}")
    result = json.loads(done.stdout.split(_RESULT, 1)[1].splitlines()[0])
    said = done.stderr
    line = re.search(r"(?:distributed compiles|compile cache): .*", said)
    result.update(row=name, cpus=cpus or "all", jobs=spec["jobs"], process_seconds=round(wall, 2),
                  busy_cpu_seconds=round(_busy_seconds() - busy, 1), line=line[0] if line else None)
    count = re.search(r"distributed compiles: (\d+) of (\d+)", said)
    if count:
        result["distributed"], result["compilations"] = int(count[1]), int(count[2])
    print(f"{name:7} {result['compile_seconds']:8.1f} s  cpus {result['cpus']:>7}  -j {spec['jobs']:<3} "
          f"{result['busy_cpu_seconds']:8.1f} CPU-s  {result['line'] or ''}", flush=True)
    return result


def _env(cache: Path, home: Path | None = None, **extra: str) -> dict:
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))  # keep carried packages
    env = {**os.environ, "KBUILD_CACHE": str(cache), "CI": "1", "PYTHONPATH": path, "PYTHONUNBUFFERED": "1", **extra}
    for name in ("CCACHE_DIR", "KBUILD_DIST_SCHEDULER", "TORCH_CUDA_ARCH_LIST", "NVCC_THREADS"):
        env.pop(name, None)
    if home:
        env["HOME"] = str(home)
    return env


def _cpu_lists(cores: list[int], size: int) -> list[str]:
    chunks = [cores[i:i + size] for i in range(0, len(cores), size)]
    return [",".join(map(str, c)) for c in chunks if len(c) == size]


def _compare(rows: dict) -> dict:
    """For each row, how many of its objects are byte-identical to `local`'s, and which are not."""
    if "local" not in rows:
        return {}
    base = {u["source"]: u for u in rows["local"]["units"]}
    out = {}
    for name, row in rows.items():
        if name == "local":
            continue
        same = [u for u in row["units"] if base[u["source"]]["sha256"] == u["sha256"]]
        locals_only = [u["source"] for u in row["units"] if u not in same
                       and base[u["source"]]["sha256_no_locals"] == u["sha256_no_locals"]]
        differ = [u["source"] for u in row["units"] if u not in same and u["source"] not in locals_only]
        out[f"{name}_vs_local"] = {"identical": len(same), "only_local_symbols_differ": locals_only, "differ": differ}
    return out


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        print(_RESULT + json.dumps(_worker(json.loads(sys.argv[2]))), flush=True)
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kernel", type=Path, help="the kernel project folder (flash-attn2's for issue 34)")
    parser.add_argument("--units", nargs="+", default=list(FLASH_ATTN2_UNITS), metavar="GLOB",
                        help="the compile units, as globs of their sources relative to the kernel folder")
    parser.add_argument("--cuda-archs", default="9.0a")
    parser.add_argument("--machine-cpus", type=int, default=8, metavar="K",
                        help="the cores of one \"machine\": row half, and each build server of row dist")
    parser.add_argument("--rows", nargs="+", choices=ROWS, default=list(ROWS))
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "dist_compile_results.json")
    parser.add_argument("--keep", type=Path, default=None, metavar="DIR",
                        help="work in DIR (an empty or new folder) and keep it: the objects, logs and servers' logs")
    args = parser.parse_args()
    kernel = args.kernel.resolve()
    if not (kernel / "build.toml").is_file():
        sys.exit(f"{args.kernel}: no build.toml (pass a kernel project folder)")
    cores = sorted(os.sched_getaffinity(0))
    machines = _cpu_lists(cores, args.machine_cpus)
    if ("half" in args.rows or "dist" in args.rows) and len(machines) < 2:
        sys.exit(f"--machine-cpus {args.machine_cpus}: rows half and dist need two machines of that many cores; "
                 f"this run may use {len(cores)}")
    spec = {"archs": args.cuda_archs, "globs": args.units}
    toolchains = os.environ.get("KBUILD_TOOLCHAINS") or str(Path.home() / ".cache" / "kbuild" / "toolchains")
    rows: dict = {}
    if args.keep and args.keep.exists() and any(args.keep.iterdir()):
        sys.exit(f"--keep {args.keep}: expected an empty or new folder")
    keep = nullcontext(str(args.keep)) if args.keep else tempfile.TemporaryDirectory(prefix="kbuild-dist-compile-")
    with keep as tmp:
        root = Path(tmp).resolve()
        with redis_server(root / "redis") as redis:
            if "local" in args.rows:
                rows["local"] = _row("local", _copy_kernel(kernel, root / "m1" / kernel.name),
                                     _env(root / "m1" / "cache", KBUILD_REMOTE_CACHE=redis,
                                          KBUILD_TOOLCHAINS=toolchains),
                                     {**spec, "jobs": len(cores) + 2}, None)
                rows["local"]["redis_entries"] = keys(redis)
            if "half" in args.rows:
                rows["half"] = _row("half", _copy_kernel(kernel, root / "m2" / kernel.name),
                                    _env(root / "m2" / "cache", KBUILD_REMOTE_CACHE="off",
                                         KBUILD_TOOLCHAINS=toolchains),
                                    {**spec, "jobs": args.machine_cpus + 2}, machines[0])
            if "dist" in args.rows:
                with sccache_dist(root / "cluster", servers=2, cpus=machines[:2]) as cluster:
                    servers = ServerCpu(f"{root}/cluster/server")
                    servers.start()
                    rows["dist"] = _row("dist", _copy_kernel(kernel, root / "m3" / kernel.name),
                                        _env(root / "m3" / "cache", KBUILD_REMOTE_CACHE="off",
                                             KBUILD_DIST_TOKEN=cluster.token, KBUILD_TOOLCHAINS=toolchains),
                                        {**spec, "jobs": 2 * args.machine_cpus + 2, "dist": cluster.url}, None)
                    rows["dist"]["servers_cpu_seconds"] = round(servers.seconds(), 1)
            if "shared" in args.rows:
                (root / "m4" / "home").mkdir(parents=True)
                rows["shared"] = _row("shared", _copy_kernel(kernel, root / "m4" / "src" / kernel.name),
                                      _env(root / "m4" / "cache", root / "m4" / "home", KBUILD_REMOTE_CACHE=redis,
                                           KBUILD_TOOLCHAINS=toolchains),
                                      {**spec, "jobs": len(cores) + 2}, None)
    ratios = {}
    for top, bottom in (("dist", "local"), ("dist", "half"), ("shared", "local"), ("half", "local")):
        if top in rows and bottom in rows:
            ratios[f"{top}/{bottom}"] = round(rows[top]["compile_seconds"] / rows[bottom]["compile_seconds"], 3)
    result = {"kernel": kernel.name, "units": args.units, "cuda_archs": args.cuda_archs, "host_cpus": len(cores),
              "machine_cpus": args.machine_cpus, "rows": rows, "ratios": ratios, "objects": _compare(rows)}
    if "local" in rows:
        result["model"] = model(kernel, rows["local"], rows.get("dist"), len(cores))
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print("ratios: " + ", ".join(f"{k} {v:.2f}x" for k, v in ratios.items()))
    for name, same in result["objects"].items():
        print(f"objects {name}: {same['identical']} identical, {len(same['only_local_symbols_differ'])} identical but "
              f"for local symbols" + (f", differ: {same['differ']}" if same["differ"] else ""))
    for line in result.get("model", {}).get("summary", []):
        print(line)


if __name__ == "__main__":
    main()
