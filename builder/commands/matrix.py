"""`kbuild matrix`: the workspace's matrix as CI slices (builder/plan/slices.py), and the check that
a version branch holds all of it (builder/verify/published.py).

    kbuild matrix . --slices 4              # a table: each slice's variants and estimated cost
    kbuild matrix . --slices 4 --github     # {"include": [{"slice": 1, "variants": "…"}, …]} for a job matrix
    kbuild matrix . --check --hub URL       # every kernel's branch holds the whole matrix, every
                                            # variant verifies, and this machine's one loads

Each CI job of a fan-out runs `kbuild build . --variant <each of its slice>` and `kbuild publish .
--variant …`; the last job runs `--check`.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from builder.commands.arguments import DIR_HELP, HUB_HELP, add_dir, add_hub, folder
from builder.config.environment import from_environment as builder_settings
from kbuild_common.errors import UsageError

if TYPE_CHECKING:
    from builder.report import Reporter


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("matrix", help="cut the matrix into CI slices (--slices N [--github]), or check that a "
                                             "version branch holds all of it (--check)")
    add_dir(p, DIR_HELP)
    p.add_argument("--slices", type=int, default=1, metavar="N", help="how many CI jobs to split the matrix into "
                   "(balanced by estimated compile time; default 1)")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--github", action="store_true",
                     help="print a GitHub Actions job matrix (JSON: include = one entry per slice)")
    out.add_argument("--json", action="store_true", help="print the slices as JSON")
    out.add_argument("--check", action="store_true", help="check each kernel's version branch on the hub: the "
                     "whole matrix is there, every variant verifies, and the one this machine fits loads")
    add_hub(p, "with --check: " + HUB_HELP)
    p.add_argument("--branch", default=None, help="with --check: the branch (default: [general.hub] branch, else "
                   "v<version>)")
    p.set_defaults(handler=run)


def run(args, reporter: Reporter) -> int:
    from builder.plan.slices import plan_slices, workspace_costs

    if args.slices < 1:
        raise UsageError(f"--slices: expected a positive number, got {args.slices}")
    kernels, per_variant = workspace_costs(folder(args.dir).resolve())
    if args.check:
        return _check(kernels, per_variant, args, reporter)
    slices = plan_slices(per_variant, args.slices) if per_variant else []
    if args.github:
        entries = [{"slice": i, "variants": " ".join(s.variants), "kernels": " ".join(s.kernels),
                    "estimate": s.estimate} for i, s in enumerate(slices, 1)]
        reporter.result(json.dumps({"include": entries}, separators=(",", ":")))
        return 0
    if args.json:
        reporter.result(json.dumps([{"slice": i, "variants": list(s.variants), "kernels": list(s.kernels),
                                     "estimate": s.estimate} for i, s in enumerate(slices, 1)], indent=2))
        return 0
    if len(slices) < args.slices:
        reporter.info(f"{len(per_variant)} variant name(s) in the matrix: {len(slices)} slice(s), not {args.slices}")
    for i, s in enumerate(slices, 1):
        reporter.result(f"slice {i}: estimate {s.estimate:g} ({', '.join(s.kernels)})")
        for name in s.variants:
            reporter.result(f"  {name}")
    return 0


def _check(kernels, per_variant, args, reporter: Reporter) -> int:
    """`--check`: each finding as one line, then whether the branches hold the whole matrix."""
    from builder.verify.published import check_published
    from kbuild.hub_loader import Session
    from kbuild.settings import from_environment

    settings = from_environment()  # the runtime's reading; its Session takes it
    hub = builder_settings().hub_setting(args.hub).value  # --hub through the one cascade
    problems = 0
    for f in check_published(kernels, per_variant, Session(hub, settings), args.branch):
        if f.status == "loaded":
            reporter.result(f"loaded    {f.where} {f.variant} as {f.detail}")
        elif f.status == "unloadable":
            reporter.result(f"unloadable {f.where}: {f.detail}")
        elif f.status == "corrupt":
            reporter.result(f"corrupt   {f.where} {f.variant}: {f.detail}")
        else:  # missing, verified
            reporter.result(f"{f.status:<9} {f.where} {f.variant}")
        problems += f.problem
    if problems:
        reporter.error(f"{problems} problem(s): the branch does not hold the whole matrix in a usable state")
        return 1
    reporter.info(f"every variant of the matrix is published and verifies ({len(kernels)} kernel(s))")
    return 0
