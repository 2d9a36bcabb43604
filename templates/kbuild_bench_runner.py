"""Runs a kernel's benchmarks/ against one variant, inside the Python that loads it (`kbuild bench`
starts it with the variant on the path under the kernel's Python name; it imports nothing of kbuild,
which that Python may not have). Writes one JSON document to --out.

A benchmark class is one defined in a `benchmarks/benchmark*.py` file that derives from Hugging
Face's `kernels.benchmark.Benchmark` or kbuild's `kbuild.benchmark.Benchmark` (the same
convention: setup_<w>/setup, benchmark_<w>, verify_<w>; see kbuild/benchmark.py). Each workload
is checked once against its reference (verify_<w>, compared as Hugging Face's runner does:
allclose with atol 1e-2, unless the class sets its own `atol`/`rtol`, a kbuild extension that
Hugging Face's runner ignores), then the kernel and the reference are timed the same way, one after the
other, in this process: warm-up calls, then repeats, each call synchronised on CUDA.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import platform
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

BASES = {("kernels.benchmark", "Benchmark"), ("kbuild.benchmark", "Benchmark")}
ATOL, RTOL = 1e-2, 1e-5  # Hugging Face's `kernels benchmark` check (torch.allclose's rtol), kept so results agree


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kernel", required=True, help="the variant's Python name (on the path)")
    parser.add_argument("--device", required=True)
    parser.add_argument("--warmup", type=int, required=True)
    parser.add_argument("--repeats", type=int, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("scripts", nargs="+", type=Path)
    args = parser.parse_args()

    import torch

    kernel = importlib.import_module(args.kernel)
    gpu = torch.cuda.get_device_name() if args.device == "cuda" and torch.cuda.is_available() else None
    doc = {"torch": torch.__version__, "python": platform.python_version(), "device": args.device, "gpu": gpu,
           "cpu": platform.processor() or platform.machine(), "warmup": args.warmup, "repeats": args.repeats,
           "scripts": [run_script(path, kernel, args) for path in args.scripts]}
    args.out.write_text(json.dumps(doc, indent=1))
    return 0


def run_script(path: Path, kernel, args) -> dict:
    entry: dict[str, Any] = {"script": path.name, "classes": []}
    module_name = f"kbuild_bench_{path.stem}"
    try:
        spec = importlib.util.spec_from_file_location(module_name, path)
        if spec is None or spec.loader is None:  # not for a .py file: said as its import error
            raise ImportError(f"cannot import {path.name} as a module")
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
    except BaseException as e:  # the script's own import error is its result, not the run's end
        entry["error"] = _one_line(e)
        return entry
    classes = [obj for obj in vars(module).values() if _is_benchmark(obj, module_name)]
    if not classes:
        entry["error"] = "no Benchmark subclass (kernels.benchmark or kbuild.benchmark) defined in it"
    for cls in classes:
        names = sorted(n[len("benchmark_"):] for n in dir(cls) if n.startswith("benchmark_") and callable(getattr(cls, n)))
        entry["classes"].append({"class": cls.__name__,
                                 "workloads": [run_workload(cls, name, kernel, args) for name in names]})
    return entry


def _is_benchmark(obj, module_name: str) -> bool:
    return (isinstance(obj, type) and obj.__module__ == module_name
            and any((base.__module__, base.__name__) in BASES for base in obj.__mro__[1:]))


def run_workload(cls, name: str, kernel, args) -> dict:
    import torch

    row: dict[str, Any] = {"workload": name}
    try:
        bench = cls()
        bench.kernel, bench.device = kernel, args.device
        if getattr(bench, "seed", None) is not None:
            torch.manual_seed(bench.seed)
            random.seed(bench.seed)
        (getattr(bench, f"setup_{name}", None) or bench.setup)()
        run = getattr(bench, f"benchmark_{name}")
        reference = getattr(bench, f"verify_{name}", None)
        if reference is not None:
            run()
            _sync(args.device)
            atol, rtol = getattr(bench, "atol", ATOL), getattr(bench, "rtol", RTOL)
            expected = reference()
            row["verified"] = _close(bench.out, expected, atol, rtol)
            row["tolerance"] = {"atol": atol, "rtol": rtol}
            if not row["verified"]:
                row["max_abs_diff"] = _max_diff(bench.out, expected)
        if reference is None:
            row["kernel"] = _timed([run], args)[0]
        else:
            row["kernel"], row["reference"] = _timed([run, reference], args)
    except BaseException as e:  # one workload's failure is its row's result
        row["error"] = _one_line(e)
    return row


def _timed(fns, args) -> list[dict]:
    """Each of `fns` timed `repeats` times, taking turns (kernel, reference, reference, kernel, …)
    rather than one after the other, so a change in the machine's state while they run (clocks,
    another process, the allocator) falls on both and the ratio stays fair."""
    for _ in range(args.warmup):
        for fn in fns:
            fn()
            _sync(args.device)
    times: list[list[float]] = [[] for _ in fns]
    for i in range(args.repeats):
        order = list(enumerate(fns)) if i % 2 == 0 else list(enumerate(fns))[::-1]
        for k, fn in order:
            start = time.perf_counter()
            fn()
            _sync(args.device)
            times[k].append((time.perf_counter() - start) * 1e3)
    return [{"min_ms": min(t), "median_ms": statistics.median(t), "max_ms": max(t)} for t in times]


def _sync(device: str) -> None:
    if device == "cuda":
        import torch

        torch.cuda.synchronize()


def _close(out, expected, atol: float, rtol: float) -> bool:
    import torch

    if isinstance(expected, (tuple, list)):
        return (isinstance(out, (tuple, list)) and len(out) == len(expected)
                and all(_close(o, e, atol, rtol) for o, e in zip(out, expected)))
    return isinstance(out, torch.Tensor) and out.shape == expected.shape and bool(
        torch.allclose(out.float(), expected.float(), atol=atol, rtol=rtol))


def _max_diff(out, expected) -> float | None:
    """The largest absolute difference, to show how far off a mismatch is (None: not comparable)."""
    import torch

    if isinstance(expected, (tuple, list)) and isinstance(out, (tuple, list)) and len(out) == len(expected):
        diffs = [_max_diff(o, e) for o, e in zip(out, expected)]
        comparable = [d for d in diffs if d is not None]
        return None if len(comparable) < len(diffs) else max(comparable, default=0.0)
    if isinstance(out, torch.Tensor) and isinstance(expected, torch.Tensor) and out.shape == expected.shape:
        return (out.float() - expected.float()).abs().max().item()
    return None


def _one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"[:500]


if __name__ == "__main__":
    sys.exit(main())
