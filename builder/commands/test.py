"""`kbuild test [DIR]`: a kernel's tests/ run against each of its built variants; what follows
`--` goes to pytest (main() splits it off into args.pytest_args)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from builder.commands.arguments import add_dir, add_python, folder, python
from builder.config.environment import from_environment as builder_settings
from kbuild_common.errors import ExitCode

if TYPE_CHECKING:
    from builder.report import Reporter


def add_parser(sub) -> None:
    p = sub.add_parser("test", help="run a kernel's tests/ against its built variants")
    add_dir(p)
    p.add_argument("--variant", action="append", default=[], metavar="V",
                   help="only this built variant, even one the loader would not pick here (repeatable; default: "
                        "each built variant that can run here, a CPU variant with the GPUs hidden)")
    p.add_argument("--timeout", type=_positive_seconds, default=None, metavar="S",
                   help="stop a variant's suite after S seconds (default 3600); its log keeps what ran")
    p.epilog = "Arguments after -- go to pytest, e.g. kbuild test kernels/relu -- -k fp16 -x"
    add_python(p)
    p.set_defaults(handler=run)


def _positive_seconds(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return int(text)


def run(args, reporter: Reporter) -> int:
    from builder.verify.kernel_tests import COULD_NOT_COLLECT, NO_TESTS, test_kernels

    results = test_kernels(folder(args.dir).resolve(), tuple(args.variant), python(args), tuple(args.pytest_args),
                           reporter, builder_settings(), timeout=args.timeout)
    reporter.summary(results, "kbuild test")
    reporter.info(_tally(results))
    if all(r.status == NO_TESTS for r in results):
        return ExitCode.OK  # a kernel without tests is not the command's failure
    if not any(r.log for r in results):
        reporter.error("no variant was tested: none is built, or none can run here",
                       hint="kbuild build first, pass --python, or --variant V for one the loader would not pick here")
        return 1
    return ExitCode.FAILED if any(r.status in ("failed", COULD_NOT_COLLECT) for r in results) else ExitCode.OK


def _tally(results) -> str:
    """`kbuild test: 1 passed, 1 could not collect, 2 left out` (the statuses in _ORDER's order)."""
    from collections import Counter

    counts = Counter(r.status for r in results)
    ranked = sorted(counts, key=lambda status: _ORDER.index(status) if status in _ORDER else len(_ORDER))
    return "kbuild test: " + ", ".join(f"{counts[status]} {_LABELS.get(status, status)}" for status in ranked)


_ORDER = ("passed", "failed", "could not collect", "skipped", "left out", "no tests")
_LABELS = {"no tests": "without tests/"}
