"""`kbuild variants [DIR]`: the variants of the matrix, the toolchain each is built with, and the
ones this environment builds as it is. `kbuild variants ORG/NAME[@REV]`: a published kernel's
variants judged for this machine, accepted and rejected with the reason for each, as `kernels
variants` prints them (builder/hub/kernel_info.py). A folder of that name wins over the repo."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

from builder.commands.arguments import add_dir, add_hub, add_python, build_options
from kbuild_common.errors import KbuildError

# ORG/NAME[@REV], as kbuild.refs checks it further
_REPO = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+(?:@[^\s]+)?")

if TYPE_CHECKING:
    from builder.report import Reporter


def add_parser(sub) -> None:
    p = sub.add_parser("variants", help="list the variants of the matrix and the toolchain each is built with, or "
                                        "a published kernel's variants and which this machine loads")
    add_dir(p, help="a kernel folder or workspace (default: .), or ORG/NAME[@REV] of a published kernel "
                    "(default revision: the newest vN)")
    p.add_argument("--json", action="store_true", help="print a machine-readable listing")
    add_python(p)
    add_hub(p)
    p.add_argument("--backend", default=None, help="ORG/NAME: judge the variants for this backend (e.g. cpu)")
    p.add_argument("--all-versions", action="store_true", help="ORG/NAME: every vN branch, newest first")
    p.set_defaults(handler=run)


def run(args, reporter: Reporter) -> int:
    if _names_a_repo(args.dir):
        return _published(args, reporter)
    for flag in ("hub", "backend", "all_versions"):
        if getattr(args, flag):
            raise KbuildError(f"kbuild variants: --{flag.replace('_', '-')} is for a published kernel "
                              f"(ORG/NAME[@REV]); {args.dir} is a folder")
    from builder.plan.listing import variant_listing

    rows, none_here = variant_listing(build_options(args))
    if none_here:  # rather than leave every row unmarked
        reporter.warn(f"this environment builds none of these variants: {none_here} (kbuild build --all or "
                      "--variant provisions the toolchains they need)")
    if args.json:
        reporter.result(json.dumps(rows, indent=2))
        return 0
    for r in rows:
        if r["variant"] is None:
            reporter.result(f"{r['kernel']}: ({r['backend']} skipped: {r['skipped']})")
            continue
        archs = f"  archs {' '.join(r['archs'])}" if r.get("archs") else ""
        here = "  [this environment]" if r["here"] else ""
        here += "" if r["in_matrix"] else " (not in the matrix: kbuild build without --all)"
        reporter.result(f"{r['kernel']}: {r['variant']}  <- {r['toolchain'] or 'no toolchain (Python only)'}"
                        f"{archs}{here}{_overlaid(r)}")
    return 0


def _overlaid(row: dict) -> str:
    """Where the row's torch or CUDA release came from when it is not kbuild's own table (an
    overlay's file:line and what named it); --json gives every row's origin."""
    from builder.toolchains.versions import SOURCE

    found = [f"{kind} from {origin}" for kind, origin in row.get("from", {}).items()
             if not origin.startswith(SOURCE)]
    return f"  [{'; '.join(found)}]" if found else ""


def _names_a_repo(path) -> bool:
    """ORG/NAME[@REV] with no folder of that name (a folder named ORG may well exist: in kbuild's
    own checkout, kbuild/activation is both a folder's child and a published kernel)."""
    return not path.exists() and bool(_REPO.fullmatch(str(path)))


def _published(args, reporter: Reporter) -> int:
    from builder.config.environment import from_environment as builder_settings
    from builder.hub.kernel_info import variant_traces
    from kbuild.errors import KernelError
    from kbuild.hub_loader import Session
    from kbuild.settings import from_environment

    if args.python:
        raise KbuildError("kbuild variants: --python is for a kernel folder; a published kernel is judged "
                          "for the torch kbuild runs in")
    hub = builder_settings().hub_setting(args.hub).value  # --hub through the one cascade
    try:
        record = variant_traces(Session(hub, from_environment()), str(args.dir), args.backend, args.all_versions)
    except KernelError as e:  # the runtime's errors (no such repo, revision, hub) as one line
        raise KbuildError(str(e)) from None
    if args.json:
        reporter.result(json.dumps(record, indent=2))
        return 0
    reporter.result(f"{record['repo']} on {record['hub']}; this machine: {record['system']}")
    for revision in record["revisions"]:
        reporter.result(f"{revision['revision']} = commit {revision['commit'][:12]}:")
        for v in revision["variants"]:
            if v["accepted"]:
                mark = "fits, get_kernel loads this" if v["loads"] else "fits"
                mark += f" ({v['note']})" if v["note"] else ""
            else:
                mark = f"rejected ({v['reason']})"
            reporter.result(f"  {v['variant']}: {mark}")
        if not revision["variants"]:
            reporter.result("  (no build/ folder: nothing was published there)")
    return 0
