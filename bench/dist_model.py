"""The whole release build of a kernel on 1, 8 and 64 machines, modelled from one measured set of
its units (bench/dist_compile.py, issue 34).

    python bench/dist_model.py DIST_COMPILE.json KERNEL_DIR [--cores N] [--write]

models again from a bench/dist_compile.py result (its rows local and dist) and prints the summary:
for machines of the measuring host's size, or of N cores each (the units' core-seconds as measured);
--write puts the new model into the JSON.

What is measured there, at one arch: each unit's compile time with every core busy (row local) and
the CPU the row kept busy, and the same units through sccache-dist (dist: the CPU it took beyond
local's, and the client's CPU seconds per unit). What the release build is comes
from kbuild's own tables: the variants of the default matrix (plan/matrix.py) and the archs each
compiles for (`variant_archs`), and the kernel's CUDA units (its build.toml).

The model, stated so it can be checked against a real run:
- a unit costs core-seconds: its wall time in ninja's log scaled so that the measured units together
  cost the CPU row local kept busy (ninja runs more jobs than there are cores, and a unit's wall
  time then counts the time it waited for one);
- a unit not in the measured set takes the measured set's mean; every arch costs what the measured
  arch cost (cicc and ptxas dominate and scale with the arch count);
- one machine (kbuild alone, C cores): a job is one unit of one variant, all its archs in one nvcc
  (with many units kbuild gives each nvcc one thread); jobs go longest-first to the first free core;
- M machines through sccache-dist: sccache runs each arch's cicc and ptxas as a job of its own on a
  server, so a job is one unit at one arch, plus the measured overhead per job (the CPU dist took
  beyond local's, per unit; none when it took less); the client's share
  (nvcc's preprocessing and driver steps, sccache's packaging) runs on the client's C cores and
  bounds the build from below;
- links are left out (the measured set links no library): a release adds one link per variant.
"""

from __future__ import annotations

import argparse
import heapq
import json
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # builder/, for release_jobs
from builder.plan import matrix_variants, select, variant_archs  # noqa: E402
from builder.project import load_manifest  # noqa: E402


def makespan(durations: list[float], slots: int) -> float:
    """Longest-first list scheduling onto `slots` cores (within 4/3 of the best schedule)."""
    free = [0.0] * max(1, slots)
    for d in sorted(durations, reverse=True):
        heapq.heappush(free, heapq.heappop(free) + d)
    return max(free)


def release_jobs(kernel: Path) -> dict:
    """The kernel's CUDA units and, per CUDA variant of the default matrix, the archs it compiles."""
    m = load_manifest(kernel / "build.toml")
    units = sorted({s for section in m.kernels_for("cuda") for s in section.src if s.endswith(".cu")})
    variants = {}
    for mv in matrix_variants(m, select())[0]:
        if mv.variant.backend == "cuda" and mv.target and mv.target.toolkit:
            variants[mv.variant.name] = variant_archs(m, mv.target.toolkit)
    return {"units": units, "variants": variants}


def model(kernel: Path, local: dict, dist: dict | None, cores: int,
          machines: tuple[int, ...] = (1, 8, 64)) -> dict:
    measured, scale = unit_costs(local)
    if not measured:
        return {"summary": ["model: no unit time was measured"]}
    mean = statistics.fmean(measured.values())
    release = release_jobs(kernel)
    times = [measured.get(u, mean) for u in release["units"]]
    overhead, client = _dist_costs(local, dist)
    one = [t * len(archs) for archs in release["variants"].values() for t in times]
    per_arch = [t + overhead for archs in release["variants"].values() for t in times for _ in archs]
    figures: dict[int, dict[str, Any]] = {}  # machines: seconds, ratio, bound, ...
    for n in machines:
        if n == 1:
            figures[n] = {"seconds": makespan(one, cores), "bound": "compile", "jobs": len(one)}
            continue
        compile_s = makespan(per_arch, cores * n)
        client_s = client * len(per_arch) / cores
        figures[n] = {"seconds": max(compile_s, client_s), "jobs": len(per_arch),
                      "compile_seconds": round(compile_s, 1), "client_seconds": round(client_s, 1),
                      "bound": "client" if client_s > compile_s else "compile"}
    base = figures[1]["seconds"]
    for f in figures.values():
        f["seconds"] = round(f["seconds"], 1)
        f["ratio"] = round(f["seconds"] / base, 3)
    longest = max(times)
    result = {"assumptions": __doc__.split("The model, stated so it can be checked against a real run:")[1].strip(),
              "units": len(release["units"]), "measured_units": len(measured), "unit_cost_scale": round(scale, 3),
              "mean_unit_seconds": round(mean, 1),
              "longest_unit_seconds": round(longest, 1), "variants": release["variants"],
              "overhead_per_job_seconds": round(overhead, 2), "client_cpu_per_job_seconds": round(client, 2),
              "cores_per_machine": cores, "critical_path_seconds": {
                  "one_machine": round(longest * max(len(a) for a in release["variants"].values()), 1),
                  "distributed": round(longest + overhead, 1)},
              "machines": {str(n): f for n, f in figures.items()}}
    result["summary"] = _summary(result, figures)
    return result


def unit_costs(row: dict) -> tuple[dict[str, float], float]:
    """({unit: core-seconds}, the scale from wall time): each unit's wall time times the row's busy
    CPU over the units' summed wall time (1 where the row has no CPU figure)."""
    walls = {u["source"]: u["seconds"] for u in row["units"] if u["seconds"] is not None}
    busy = row.get("busy_cpu_seconds")
    scale = busy / sum(walls.values()) if busy and walls and sum(walls.values()) > 0 else 1.0
    return {source: wall * scale for source, wall in walls.items()}, scale


def _dist_costs(local: dict, dist: dict | None) -> tuple[float, float]:
    """Per unit at one arch: the CPU seconds dist took beyond local's (sandboxing, packaging,
    transfer; none when it took less: the difference is then noise), and the client's CPU seconds
    (the host's busy time less the servers')."""
    if not dist:
        return 0.0, 0.0
    units = max(1, len(dist["units"]))
    overhead = max(0.0, dist["busy_cpu_seconds"] - local.get("busy_cpu_seconds", dist["busy_cpu_seconds"])) / units
    client = max(0.0, dist["busy_cpu_seconds"] - dist.get("servers_cpu_seconds", 0.0)) / units
    return overhead, client


def _summary(result: dict, figures: dict) -> list[str]:
    lines = [f"model: {result['units']} units x {len(result['variants'])} CUDA variants "
             f"({', '.join(f'{k}: {len(v)} archs' for k, v in result['variants'].items())}); "
             f"unit mean {result['mean_unit_seconds']} core-s, longest {result['longest_unit_seconds']} core-s "
             f"({result['measured_units']} measured; wall x {result['unit_cost_scale']})"]
    for n, f in figures.items():
        extra = "" if n == 1 else (f" (bound: {f['bound']}; compile {f['compile_seconds']} s, "
                                   f"client {f['client_seconds']} s)")
        lines.append(f"  {n:3} machine(s) of {result['cores_per_machine']} cores: {f['seconds']:9.1f} s  "
                     f"{f['ratio']:.3f}x of one{extra}")
    eight = figures.get(8)
    if eight:
        need = 0.2 * figures[1]["seconds"]
        if eight["seconds"] <= need:
            lines.append("  8 machines reach 0.2x of one in this model")
        elif eight["bound"] == "client":
            lines.append(f"  8 machines miss 0.2x ({need:.0f} s) because the one client's share takes "
                         f"{eight['client_seconds']} s: it must shrink {eight['client_seconds'] / need:.1f}x "
                         "(preprocess once per unit instead of per arch, or split the build over clients)")
        else:
            lines.append(f"  8 machines miss 0.2x ({need:.0f} s): compiles take {eight['compile_seconds']} s; "
                         f"the per-job overhead ({result['overhead_per_job_seconds']} s) or the longest unit bounds it")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("result", type=Path, help="a bench/dist_compile.py --out JSON")
    parser.add_argument("kernel", type=Path, help="the kernel project folder it measured")
    parser.add_argument("--cores", type=int, default=None, metavar="N",
                        help="cores of each modelled machine (default: the measuring host's)")
    parser.add_argument("--write", action="store_true", help="replace the JSON's model with this one")
    args = parser.parse_args(argv)
    try:
        doc = json.loads(args.result.read_text())
        rows, cores = doc["rows"], doc["host_cpus"]
        local = rows["local"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        parser.error(f"argument result: {args.result} is not a bench/dist_compile.py result ({type(e).__name__}: {e})")
    if not (args.kernel / "build.toml").is_file():
        parser.error(f"argument kernel: {args.kernel} has no build.toml")
    if args.cores is not None and args.cores < 1:
        parser.error(f"argument --cores: must be 1 or more, got {args.cores}")
    doc["model"] = model(args.kernel, local, rows.get("dist"), args.cores or cores)
    print("\n".join(doc["model"]["summary"]))
    if args.write:
        args.result.write_text(json.dumps(doc, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
