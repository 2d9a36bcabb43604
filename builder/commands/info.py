"""`kbuild info ORG/NAME[@REV]`: what a hub holds for a kernel (builder/hub/kernel_info.py): its
versions, and at the requested one (default: the newest vN) each variant with its size, ABI floor
and whether this machine can load it — the variant `get_kernel` would load is marked.

    kbuild info kbuild/activation            # the newest version
    kbuild info kbuild/activation@v1 --json
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from builder.commands.arguments import add_hub
from builder.config.environment import from_environment as builder_settings
from kbuild_common.errors import KbuildError

if TYPE_CHECKING:
    from builder.report import Reporter


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("info", help="a hub's versions and variants of a kernel, and the one this machine loads")
    p.add_argument("repo", metavar="ORG/NAME[@REV]", help="the kernel; @v2, @<branch>, @<sha> (default: the newest vN)")
    add_hub(p)
    p.add_argument("--backend", default=None, help="judge the variants for this backend (e.g. cpu)")
    p.add_argument("--json", action="store_true", help="print a machine-readable record")
    p.set_defaults(handler=run)


def run(args, reporter: Reporter) -> int:
    from builder.hub.kernel_info import kernel_info
    from kbuild.errors import KernelError
    from kbuild.hub_loader import Session
    from kbuild.settings import from_environment

    settings = from_environment()  # the runtime's reading; its Session takes it
    hub = builder_settings().hub_setting(args.hub).value  # --hub through the one cascade
    try:
        record = kernel_info(Session(hub, settings), args.repo, args.backend)
    except KernelError as e:  # the runtime's errors (no such repo, revision, hub) as one line
        raise KbuildError(str(e)) from None
    if args.json:
        reporter.result(json.dumps(record, indent=2))
    else:
        _render(record, reporter)
    return 0


def _render(record: dict, reporter: Reporter) -> None:
    from builder.report import human_size

    reporter.result(f"{record['repo']} on {record['hub']}")
    listed = ", ".join(f"{v} ({sha[:12]})" for v, sha in record["versions"].items()) or "none"
    reporter.result(f"versions: {listed}")
    reporter.result(f"{record['revision']} = commit {record['commit'][:12]}; this machine: {record['system']}")
    rows = record["variants"]
    width = max((len(r["variant"]) for r in rows), default=0)
    for r in rows:
        mark = "<- get_kernel loads this" if r["loads"] else ("fits" if r["fits"] else f"rejected ({r['why']})")
        if r["fits"] and r["why"]:  # why it ranks where it does, or what its checks noted
            mark += f" ({r['why']})"
        floor = f"  {r['floor']}" if r["floor"] else ""
        reporter.result(f"  {r['variant']:<{width}}  {human_size(r['size']):>8}  {mark}{floor}")
        for line in (r["layers"] or {}).values():  # its published kbuild check-layers verdict
            if line:
                reporter.result(f"  {'':<{width}}  {line}")
    if not rows:
        reporter.result(f"  (no build/ folder at {record['commit'][:12]}: nothing was published there)")
