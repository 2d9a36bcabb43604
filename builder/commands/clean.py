"""`kbuild clean [DIR]`: remove built variants and .kbuild/ (or, with --stale, only stale
variants) from a kernel or each member of a workspace (builder/stage/clean.py)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from builder.commands.arguments import folder

if TYPE_CHECKING:
    from builder.report import Reporter


def add_parser(sub) -> None:
    p = sub.add_parser("clean", help="remove built variants and .kbuild/ (or, with --stale, only stale variants)")
    p.add_argument("dir", nargs="?", default=".", type=Path, help="a kernel folder or a workspace (default: .)")
    p.add_argument("--stale", action="store_true",
                   help="only variants built from other sources than the folder holds now, and leftovers "
                        "of interrupted builds")
    p.add_argument("--dry-run", action="store_true", help="print what would be removed; remove nothing")
    p.set_defaults(handler=run)


def run(args, reporter: Reporter) -> int:
    from builder.report import human_size
    from builder.stage.clean import clean

    total, count = 0, 0
    for removal in clean(folder(args.dir), stale_only=args.stale, dry_run=args.dry_run):
        reporter.result(f"{'would remove' if args.dry_run else 'removed'} {removal.path} "
                        f"({human_size(removal.size)}, {removal.why})")
        total, count = total + removal.size, count + 1
    if count:
        reporter.result(f"{'would free' if args.dry_run else 'freed'} {human_size(total)}")
    else:
        reporter.result("nothing to clean" + (" (no stale variants)" if args.stale else ""))
    return 0
