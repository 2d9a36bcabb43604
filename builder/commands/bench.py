"""`kbuild bench [DIR | ORG/NAME@REV]`: a kernel's benchmarks/ (Hugging Face's `kernels.Benchmark`
convention) against each of its built variants that can run here (chosen as `kbuild test` chooses
them: a CPU variant with the GPUs hidden), or against the published variant get_kernel would load
here; each workload beside its reference; a table, and on request JSON and an SVG plot."""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from builder.commands.arguments import add_kernel_target, add_python, folder, published, python
from builder.config.environment import from_environment as builder_settings
from builder.layout import BENCH_DIR
from kbuild_common.errors import ExitCode, UsageError

if TYPE_CHECKING:
    from builder.report import Reporter


def add_parser(sub) -> None:
    p = sub.add_parser("bench", help="time a kernel's benchmarks/ against its built variants")
    add_kernel_target(p, "a kernel folder (default: .), or a published kernel: the variant get_kernel would load "
                         "here and the benchmarks/ published with it, from --hub", "benchmarks")
    p.add_argument("--variant", action="append", default=[], metavar="V",
                   help="only this built variant, even one the loader would not pick here (repeatable; default: "
                        "each built variant that can run here, a CPU variant with the GPUs hidden)")
    p.add_argument("--warmup", type=_count(0), default=5, metavar="N", help="untimed calls first (default 5)")
    p.add_argument("--repeats", type=_count(1), default=20, metavar="N", help="timed calls per workload (default 20)")
    p.add_argument("--json", type=Path, default=None, metavar="F", help="write every workload's figures to F")
    p.add_argument("--plot", type=Path, default=None, metavar="F.svg", help="draw the speed-ups into F.svg")
    add_python(p)
    p.set_defaults(handler=run)


def _count(least: int):
    def parse(text: str) -> int:
        if not text.isdigit() or int(text) < least:
            raise argparse.ArgumentTypeError(f"expected a whole number >= {least}, got {text!r}")
        return int(text)
    return parse


def run(args, reporter: Reporter) -> int:
    from builder.verify.bench_plot import plot_speedups
    from builder.verify.benchmarks import bench_kernels, bench_published

    settings = builder_settings()
    if not published(args.target):
        result = bench_kernels(folder(Path(args.target)).resolve(), tuple(args.variant), python(args), reporter,
                               settings, warmup=args.warmup, repeats=args.repeats)
    else:
        if args.variant or args.python:
            raise UsageError("--variant and --python are for a kernel folder; ORG/NAME@REV runs the variant "
                             "get_kernel picks for this Python")
        with tempfile.TemporaryDirectory(prefix="kbuild-bench-") as work:
            result = bench_published(args.target, settings.hub_setting(args.hub).value, settings.token, reporter,
                                     Path(work), trust_remote_code=args.trust_remote_code, warmup=args.warmup,
                                     repeats=args.repeats)
    rows = [[f"{w.kernel}/{w.variant}", f"{w.script} {w.cls}.{w.name}", w.device, *_figures(w)]
            for w in result.workloads]
    reporter.table("kbuild bench: median (min-max) of each workload, kernel and reference in one process",
                   ["variant", "workload", "on", "kernel", "reference", "speed-up", "check"], rows, right=(3, 4, 5))
    for status, entries in (("skipped", result.skipped), ("left out", result.left_out)):
        for kernel, variant, why in entries:
            reporter.info(f"{status:9} {kernel}/{variant}: {why}")
    for w in result.workloads:
        if w.error:
            reporter.error(f"{w.kernel}/{w.variant} {w.script} {w.cls}.{w.name}: {w.error}")
    if args.json:
        args.json.write_text(json.dumps(result.to_json(), indent=1))
        reporter.info(f"wrote {args.json}")
    if args.plot:
        bars = plot_speedups(result, args.plot)
        reporter.info(f"wrote {args.plot} ({bars} workload(s) with a reference)")
    for kernel, root in result.roots.items():
        # each kernel keeps its latest results, which `kbuild publish --with-bench` attaches
        mine = result.of(kernel)
        if mine.workloads:
            latest = root / BENCH_DIR
            latest.mkdir(parents=True, exist_ok=True)
            (latest / "results.json").write_text(json.dumps(mine.to_json(), indent=1))
            plot_speedups(mine, latest / "results.svg")
    if not result.workloads:
        why = ": every variant was skipped or left out" if result.skipped or result.left_out else ""
        reporter.error(f"no workload ran{why}",
                       hint="--variant V for one the loader would not pick here" if result.left_out else None)
        return ExitCode.FAILED
    return ExitCode.OK if all(w.ok for w in result.workloads) else ExitCode.FAILED


def _figures(w) -> list[str]:
    def ms(t):
        return "-" if t is None else f"{_ms(t.median_ms)} ({_ms(t.min_ms)}-{_ms(t.max_ms)})"
    check = "error" if w.error else {True: "matches", False: "DIFFERS", None: "no verify"}[w.verified]
    if w.verified is False and w.max_abs_diff is not None:
        check += f" (max |diff| {w.max_abs_diff:.3g})"
    return [ms(w.timing), ms(w.reference), "-" if w.speedup is None else f"{w.speedup:.2f}x", check]


def _ms(value: float) -> str:
    return f"{value * 1e3:.1f} us" if value < 1 else f"{value:.2f} ms"
