"""`kbuild variants [DIR]`: the variants of the matrix, the toolchain each is built with, and the
ones this environment builds as it is."""

from __future__ import annotations

import json

from builder.commands.arguments import add_dir, add_python, build_options

TYPE_CHECKING = False
if TYPE_CHECKING:
    from builder.report import Reporter


def add_parser(sub) -> None:
    p = sub.add_parser("variants", help="list the variants of the matrix and the toolchain each is built with")
    add_dir(p)
    p.add_argument("--json", action="store_true", help="print a machine-readable listing")
    add_python(p)
    p.set_defaults(handler=run)


def run(args, reporter: Reporter) -> int:
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
                        f"{archs}{here}")
    return 0
