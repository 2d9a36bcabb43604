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
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from builder.build import BuildOptions, _write_graph, nvcc_threads, plan_jobs  # noqa: E402
from builder.ninja_run import ninja_binary  # noqa: E402
from builder.report import Reporter  # noqa: E402

_BASELINE = r"""
import json, sys, time, torch.utils.cpp_extension as ce
name, src, build, flags, includes = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4]), json.loads(sys.argv[5])
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
    jobs, _ = plan_jobs(options, Reporter(plain=True), {})
    jobs = [replace(j, plan=replace(j.plan, variants=tuple(v for v in j.plan.variants if v.variant.backend == "cuda")))
            for j in jobs]
    variant = next(v for j in jobs for v in j.plan.variants)
    unit = next(u for u in variant.units if u.source.as_posix().endswith(source))
    return (options, jobs, variant), unit


def kbuild_unit(kernel: Path, source: str, cores: int) -> dict:
    (options, jobs, variant), unit = _plan_unit(kernel, source)
    ninja = _write_graph(options, jobs, None)
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


def baseline_args(unit, work: Path) -> list[str]:
    flags = [f for f in unit.flags if not f.startswith(("-I", "-std="))]
    includes = [f[2:] for f in unit.flags if f.startswith("-I")]
    build = work / unit.source.stem
    build.mkdir(parents=True)
    return [sys.executable, "-c", _BASELINE, f"bench_{unit.source.stem}", str(unit.source), str(build),
            json.dumps(flags), json.dumps(includes)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("units", nargs="+", metavar="KERNEL_DIR:UNIT")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "nvcc_parallel_results.json")
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    env = {**os.environ, "MAX_JOBS": "1"}
    env.pop("TORCH_CUDA_ARCH_LIST", None)
    units = [(Path(k).resolve(), src) for k, src in (spec.split(":", 1) for spec in args.units)]
    with tempfile.TemporaryDirectory(prefix="kbuild-bench-") as tmp, ThreadPoolExecutor(len(units)) as pool:
        # The baselines start first and run beside kbuild's compiles: each is one nvcc on one core,
        # so with kbuild's threads the machine is at most (threads + units) cores busy. That costs
        # kbuild a little (shared memory bandwidth, turbo), never the baseline: kbuild's figures
        # are conservative, and the whole run takes the baseline's time, not the sum.
        runs = []
        for kernel, source in units:
            unit = _plan_unit(kernel, source)[1]
            runs.append(pool.submit(subprocess.run, baseline_args(unit, Path(tmp)), capture_output=True,
                                    text=True, env=env))
        rows = []
        for kernel, source in units:
            row = kbuild_unit(kernel, source, cores)
            print(f"kbuild  {source}: {row['seconds']:.1f} s ({row['threads']} threads, {len(row['archs'])} archs)",
                  flush=True)
            rows.append(row)
        for row, run in zip(rows, runs):
            done = run.result()
            if done.returncode:
                sys.exit(f"baseline failed:\n{done.stdout[-2000:]}{done.stderr[-3000:]}")
            row["baseline"] = json.loads(done.stdout.strip().splitlines()[-1])
    out = []
    for row in rows:
        unit = row.pop("unit")
        ratio = row["seconds"] / row["baseline"]["seconds"]
        print(f"{unit.source.name:32} kbuild {row['seconds']:7.1f} s  cpp_extension.load "
              f"{row['baseline']['seconds']:7.1f} s  ratio {ratio:.2f}x (target <= 0.35x)")
        out.append({"ratio": round(ratio, 3), **row,
                    "cores": cores, "nvcc": unit.compiler, "flags": list(unit.flags)})
    args.out.write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
