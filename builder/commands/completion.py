"""`kbuild completion SHELL`: a shell completion script, generated from kbuild's own parser so it
never drifts from the commands."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from builder.report import Reporter


def add_parser(sub) -> None:
    p = sub.add_parser("completion", help="print a shell completion script: eval \"$(kbuild completion bash)\"")
    p.add_argument("shell", choices=("bash", "zsh", "tcsh"), help="the shell to complete kbuild's commands in")
    p.set_defaults(handler=run)


def run(args, reporter: Reporter) -> int:
    import shtab

    # the whole CLI's parser, which main hands every command: importing main here would be a circle
    reporter.result(shtab.complete(args.cli_parser, shell=args.shell))
    return 0
