"""The `kbuild` command line: parse → one library call → render. Errors are one line.

Each command is a module of this package with its arguments (`add_parser`) and its handler;
this one assembles them in the order of the work (COMMANDS), adds the global options, dispatches
and turns each KbuildError into its lines and exit code.

The parser needs only the standard library: `kbuild --help` works in a plain `pip install
kbuild`, and a command whose libraries (the `build` extra) are missing says what to install
(builder/extras.py). So each handler imports what it runs.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from typing import TYPE_CHECKING

from builder import __version__
from builder.commands import (
    bench,
    build,
    check,
    check_abi,
    check_layers,
    clean,
    completion,
    hub,
    info,
    init,
    lock,
    matrix,
    publish,
    reproduce,
    test,
    toolchain,
    update_build,
    variants,
    verify,
)
from builder.config.environment import from_environment as builder_settings
from kbuild_common.errors import ExitCode, KbuildError

if TYPE_CHECKING:
    from builder.report import Reporter

# each adds its own parser(s): lock adds lock and download, hub its serve and gc
COMMANDS = (init, check, update_build, variants, build, check_abi, test, bench, check_layers, publish, reproduce,
            verify, matrix, info, lock, hub, toolchain, clean, completion)


def main(argv: list[str] | None = None) -> int:
    parser_ = parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    # What follows `--` goes to pytest untouched (`kbuild test DIR --variant V -- -k name`):
    # split here, since argparse cannot tell optional DIR and trailing arguments apart.
    passthrough = argv[argv.index("--") + 1:] if "--" in argv else []
    args = parser_.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    if passthrough and args.command != "test":
        parser_.error(f"arguments after -- are for kbuild test only, got {' '.join(passthrough)}")
    args.pytest_args = passthrough
    args.cli_parser = parser_  # for `kbuild completion`, which generates its script from it
    from kbuild.errors import InvalidSetting

    try:
        return _run(args)
    except InvalidSetting as e:  # a variable or config file the settings read (each command's) is malformed
        if args.debug:
            raise
        print(f"kbuild: error: {e}", file=sys.stderr)
        return ExitCode.USAGE
    except ModuleNotFoundError as e:
        from builder.extras import missing_extra_message

        message = None if args.debug else missing_extra_message(e, f"kbuild {args.command}")
        if message is None:
            raise
        print(f"kbuild: error: {message}", file=sys.stderr)  # no rich to print with: it may be what is missing
        return ExitCode.TOOLCHAIN


def _run(args) -> int:
    from builder.report import Reporter
    from kbuild_common.notices import reporting

    reporter = Reporter(verbose=getattr(args, "verbose", False), plain=_plain())
    # The one output channel: notices and traces of code without a Reporter reach this one live
    # (builder/notices.py); Python warnings (a library's, or a notice from a thread that does not
    # see the command's context) are collected and shown through it too.
    with reporting(reporter), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            code = args.handler(args, reporter)
        except KbuildError as e:
            _show_warnings(caught, reporter)
            if args.debug:
                raise
            reporter.failure(e)
            return e.exit_code
        except KeyboardInterrupt:
            reporter.error(f"interrupted; {_KEPT.get(args.command, 'nothing half-done was kept')}")
            return 130
    _show_warnings(caught, reporter)
    return code


# What an interrupted command leaves: every writer stages its work and swaps it in whole.
_KEPT = {
    "build": "build/ keeps its previous variants",
    "publish": "the branch keeps its previous commit",
    "toolchain": "a half-installed toolchain was removed; installed ones are untouched",
}


def _plain() -> bool | None:
    # CI logs want plain lines, not a live progress bar.
    return True if builder_settings().ci else None


def _show_warnings(caught, reporter: Reporter) -> None:
    for w in caught:
        reporter.warn(str(w.message))


def parser() -> argparse.ArgumentParser:
    """The whole CLI: global options, then each command's own arguments, in the order of the work
    (write, check, build, test, publish; then CI, loading, upkeep), as `kbuild --help` lists them."""
    root = argparse.ArgumentParser(prog="kbuild", description="Build, test and load ABI-tagged torch kernels.")
    root.add_argument("--version", action="version", version=f"kbuild {__version__}")
    root.add_argument("--debug", action="store_true", help="show tracebacks for errors")
    sub = root.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.add_parser(sub)
    _debug_everywhere(root)
    return root


def _debug_everywhere(parser: argparse.ArgumentParser) -> None:
    """`--debug` after the command too (kbuild build . --debug): every subcommand accepts it; a
    suppressed default keeps one given before the command."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                if not any("--debug" in a.option_strings for a in sub._actions):
                    sub.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                                     help="show tracebacks for errors")
                _debug_everywhere(sub)


if __name__ == "__main__":
    sys.exit(main())
