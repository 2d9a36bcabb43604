"""Parallel nvcc benchmark: one heavy `.cu` of a real kernel, cold, for the full default arch list.

    python bench/nvcc_parallel.py KERNEL_DIR:UNIT [KERNEL_DIR:UNIT ...] [--out FILE.json]

e.g. `/tmp/corpus/causal-conv1d:causal-conv1d/causal_conv1d_bwd.cu`. For each unit, in order:
- kbuild: the kernel's graph as `kbuild build` writes it (this torch, the nvcc found through
  CUDA_HOME, every default capability, no compile cache), then ninja builds that unit's object
  alone, with the nvcc threads kbuild gives a graph of one unit (NVCC_THREADS overrides);
- baseline: `torch.utils.cpp_extension.load` of the same source with the same flags (kbuild's
  -gencode list, defines, includes; `-std` left to load()), a fresh build directory and no
  cache: one nvcc that compiles the archs one after another, as load() does. Its figure is the
  time spent inside load() until the object is linked (the import that follows fails: the unit
  alone is no extension, and that is not timed).
The baselines run beside kbuild's compiles (each is one nvcc process on one core), so the run
costs the wall time of the slowest baseline and kbuild's figures are, if anything, pessimistic.
Target: kbuild <= 0.35x the baseline. Prints a table and writes JSON (--out).

A baseline of a heavy unit can outlast a device session (nvcc runs ten archs one after another):
--out is rewritten every few seconds with what is known so far, and a baseline still running
when --deadline passes (or whenever the file is read) is reported as `running_for` seconds with
`ratio_at_most` = kbuild's time over that: its final ratio can only be lower.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from builder import Reporter  # noqa: E402
from builder.compile import ninja_binary, nvcc_threads, usable_cores, write_graph  # noqa: E402
from builder.config import BuildOptions  # noqa: E402
from builder.plan import plan_kernels  # noqa: E402

_BASELINE = r"""
import json, sys, time, torch.utils.cpp_extension as ce
name, src, build = sys.argv[1:4]
flags, includes = json.loads(sys.argv[4]), json.loads(sys.argv[5])
start = time.monotonic()
try:
    ce.load(name, [src], extra_cuda_cflags=flags, extra_include_paths=includes, build_directory=build, verbose=False)
except Exception as e:  # the object alone is no importable extension
    err = repr(e)[:200]
else:
    err = ""
print(json.dumps({"seconds": time.monotonic() - start, "error": err}))
"""


def _plan_unit(kernel: Path, source: str):
    """kbuild's plan of the kernel's CUDA variant (every default capability, no compile cache) and
    the unit compiling `source`."""
    options = BuildOptions(folder=kernel, python=sys.executable, compile_cache=False,
                           cuda_home=os.environ.get("CUDA_HOME"))
    jobs, _ = plan_kernels(options, Reporter(plain=True), {})
    jobs = [replace(j, plan=replace(j.plan, variants=tuple(v for v in j.plan.variants if v.variant.backend == "cuda")))
            for j in jobs]
    variant = next(v for j in jobs for v in j.plan.variants)
    unit = next(u for u in variant.units if u.source.as_posix().endswith(source))
    return (options, jobs, variant), unit


def kbuild_unit(kernel: Path, source: str, cores: int) -> dict:
    (options, jobs, variant), unit = _plan_unit(kernel, source)
    ninja, _ = write_graph(options, jobs, None)
    threads = nvcc_threads([replace(variant, units=(unit,))], None, cores,
                           int(os.environ["NVCC_THREADS"]) if os.environ.get("NVCC_THREADS") else None)
    unit.output.unlink(missing_ok=True)
    start = time.monotonic()
    done = subprocess.run([ninja_binary(), "-f", str(ninja), str(unit.output)], cwd=ninja.parent, text=True,
                          capture_output=True, env={**os.environ, "KBUILD_NVCC_THREADS": str(threads)})
    seconds = time.monotonic() - start
    if done.returncode:
        sys.exit(f"kbuild compile of {source} failed:\n{done.stdout[-3000:]}")
    return {"seconds": seconds, "threads": threads, "archs": list(variant.archs), "unit": unit,
            "variant": variant.name, "source": f"{kernel.name}/{source}"}


def baseline_args(unit, work: Path, steps: Path | None = None) -> list[str]:
    flags = [f for f in unit.flags if not f.startswith(("-I", "-std="))]
    flags += ["--time", str(steps)] if steps else []  # nvcc appends each finished phase to this CSV
    includes = [f[2:] for f in unit.flags if f.startswith("-I")]
    build = work / unit.source.stem
    build.mkdir(parents=True)
    return [sys.executable, "-c", _BASELINE, f"bench_{unit.source.stem}", str(unit.source), str(build),
            json.dumps(flags), json.dumps(includes)]


def baseline_steps(csv: Path) -> list[str]:
    """The phases nvcc's --time CSV says have finished so far ("cicc compute_80 312.4 s"): a baseline
    cut short shows how far through the archs its one nvcc got."""
    if not csv.is_file():
        return []
    steps = []
    for line in csv.read_text().splitlines()[1:]:
        cells = [c.strip() for c in line.split(",")]
        if len(cells) >= 8 and cells[7] == "ms":
            steps.append(f"{cells[1]} {cells[4] or '-'} {float(cells[6]) / 1000:.1f} s")
    return steps


def _rows_json(rows: list[dict], baselines: list[dict], cores: int) -> list[dict]:
    """What is known now: each unit's kbuild figure (once measured) and its baseline's, finished
    (`ratio`) or still running (`ratio_at_most`)."""
    out = []
    for row, base in zip(rows, baselines, strict=True):
        entry = {k: v for k, v in row.items() if k != "unit"}
        if base.get("seconds") is not None:
            entry["baseline"] = {"seconds": base["seconds"], "error": base.get("error", "")}
            if "seconds" in row:
                entry["ratio"] = round(row["seconds"] / base["seconds"], 3)
        else:
            entry["baseline"] = {"running_for": round(time.monotonic() - base["start"], 1)}
        if base.get("steps"):
            entry["baseline"]["nvcc_steps"] = baseline_steps(base["steps"])
            if "seconds" in row:
                entry["ratio_at_most"] = round(row["seconds"] / entry["baseline"]["running_for"], 3)
        if "unit" in row:
            entry.update(cores=cores, nvcc=row["unit"].compiler, flags=list(row["unit"].flags))
        out.append(entry)
    return out


def _poll(baselines: list[dict]) -> None:
    for base in baselines:
        proc = base["proc"]
        if base.get("seconds") is None and proc.poll() is not None:
            stdout, stderr = (Path(f"{base['log']}.{k}").read_text() for k in ("out", "err"))
            if proc.returncode:
                sys.exit(f"baseline {base['source']} failed:\n{stdout[-2000:]}{stderr[-3000:]}")
            base.update(json.loads(stdout.strip().splitlines()[-1]))
            print(f"baseline {base['source']}: {base['seconds']:.1f} s (cpp_extension.load, one nvcc)", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("units", nargs="+", metavar="KERNEL_DIR:UNIT")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "nvcc_parallel_results.json")
    parser.add_argument("--deadline", type=float, default=None, metavar="SECONDS",
                        help="stop waiting for baselines after this many seconds; "
                             "report bounds for those still running")
    parser.add_argument("--baseline-steps", action="store_true",
                        help="record the baselines' nvcc phases as they finish (nvcc --time): a baseline cut "
                             "short then shows which archs it got through")
    parser.add_argument("--baseline-cpus", default=None, metavar="LIST",
                        help="pin the baselines to these cores (taskset -c LIST), apart from kbuild's; "
                             "default: the cores this run may use")
    args = parser.parse_args()
    began = time.monotonic()
    cores = usable_cores()  # taskset -c pins the run to a share of the machine
    env = {**os.environ, "MAX_JOBS": "1"}
    env.pop("TORCH_CUDA_ARCH_LIST", None)
    units = [(Path(k).resolve(), src) for k, src in (spec.split(":", 1) for spec in args.units)]
    with tempfile.TemporaryDirectory(prefix="kbuild-bench-") as tmp:
        # The baselines start first and run beside kbuild's compiles: each is one nvcc on one core,
        # so with kbuild's threads the machine is at most (threads + units) cores busy. That costs
        # kbuild a little (shared memory bandwidth, turbo), never the baseline: kbuild's figures
        # are conservative, and the whole run takes the baseline's time, not the sum.
        baselines: list[dict] = []  # the proc, its log, start, source and steps
        rows: list[dict] = []
        for kernel, source in units:
            unit = _plan_unit(kernel, source)[1]
            log = Path(tmp) / f"{unit.source.stem}.baseline"  # files, not pipes: nothing blocks on a full pipe
            pin = ["taskset", "-c", args.baseline_cpus] if args.baseline_cpus else []
            steps = Path(tmp) / f"{unit.source.stem}.nvcc_time.csv" if args.baseline_steps else None
            proc = subprocess.Popen([*pin, *baseline_args(unit, Path(tmp), steps)], stdout=open(f"{log}.out", "w"),
                                    stderr=open(f"{log}.err", "w"), env=env, start_new_session=True)
            baselines.append({"proc": proc, "log": log, "start": time.monotonic(), "source": f"{kernel.name}/{source}",
                              "steps": steps})
            rows.append({"source": f"{kernel.name}/{source}"})

        def save() -> None:  # whole files only: a reader mid-run never sees half a JSON
            part = args.out.with_suffix(".part")
            part.write_text(json.dumps(_rows_json(rows, baselines, cores), indent=2) + "\n")
            part.replace(args.out)

        save()
        for i, (kernel, source) in enumerate(units):
            rows[i] = kbuild_unit(kernel, source, cores)
            print(f"kbuild  {source}: {rows[i]['seconds']:.1f} s ({rows[i]['threads']} threads, "
                  f"{len(rows[i]['archs'])} archs)", flush=True)
            _poll(baselines)
            save()
        while any(b.get("seconds") is None for b in baselines):
            if args.deadline is not None and time.monotonic() - began > args.deadline:
                break
            time.sleep(5)
            _poll(baselines)
            save()
        save()
        for base in baselines:
            if base.get("seconds") is None:  # load(), its ninja and nvcc: the whole process group
                os.killpg(base["proc"].pid, signal.SIGKILL)
    for entry in json.loads(args.out.read_text()):
        base = entry["baseline"]
        if "ratio" in entry:
            print(f"{entry['source']:56} kbuild {entry['seconds']:7.1f} s  cpp_extension.load "
                  f"{base['seconds']:7.1f} s  ratio {entry['ratio']:.2f}x (target <= 0.35x)")
        else:
            print(f"{entry['source']:56} kbuild {entry['seconds']:7.1f} s  cpp_extension.load still running after "
                  f"{base['running_for']:.1f} s  ratio <= {entry['ratio_at_most']:.2f}x (target <= 0.35x)")


if __name__ == "__main__":
    main()
