"""`kbuild check [DIR]`: validate build.toml, a kernel's or each member's of a workspace; every
error of each, one line each."""

from __future__ import annotations

from typing import TYPE_CHECKING

from builder.commands.arguments import add_dir, folder

if TYPE_CHECKING:
    from builder.report import Reporter


def add_parser(sub) -> None:
    p = sub.add_parser("check", help="validate build.toml (a kernel or a workspace): every error, one line each")
    add_dir(p)
    p.set_defaults(handler=run)


def run(args, reporter: Reporter) -> int:
    from builder.project.workspace import check_members

    for m in check_members(folder(args.dir)):  # raises every member's errors once all were read
        kinds = "torch-noarch" if m.noarch else f"{len(m.kernels)} kernel section(s)"
        reporter.result(f"{m.path}: ok ({m.name}, backends {', '.join(m.backends)}, {kinds})")
    return 0
