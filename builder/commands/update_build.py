"""`kbuild update-build [DIR] [--check]`: rewrite an edition 4 or 5 build.toml (a kernel's, or each
member's of a workspace) as edition 6, keeping comments and formatting (builder/project/update_build.py);
`--check` writes nothing and exits 1 when an upgrade is due (for CI)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from builder.commands.arguments import add_dir, folder
from kbuild_common.errors import ExitCode

if TYPE_CHECKING:
    from builder.report import Reporter


def add_parser(sub) -> None:
    p = sub.add_parser("update-build",
                       help="rewrite an edition 4 or 5 build.toml as edition 6, comments and formatting kept")
    add_dir(p)
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 when an upgrade is due")
    p.set_defaults(handler=run)


def run(args, reporter: Reporter) -> int:
    from builder.project.editions import CURRENT_EDITION
    from builder.project.update_build import plan_upgrade, write_upgrade
    from builder.project.workspace import kernel_dirs

    # every file planned (and checked) before any is written: one bad member writes nothing
    upgrades = [plan_upgrade(kernel / "build.toml") for kernel in kernel_dirs(folder(args.dir))]
    due = [u for u in upgrades if u.due]
    for u in upgrades:
        if not u.due:
            reporter.result(f"{u.path}: edition {u.edition}, nothing to do")
        elif args.check:
            reporter.result(f"{u.path}: edition {u.edition}, an upgrade is due ({'; '.join(u.changes)}): "
                            f"run kbuild update-build {args.dir or '.'}")
        else:
            write_upgrade(u)
            reporter.result(f"{u.path}: edition {u.edition} -> {CURRENT_EDITION} ({'; '.join(u.changes)})")
    return ExitCode.FAILED if args.check and due else ExitCode.OK
