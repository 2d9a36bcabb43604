"""The command line: every command and argument explains itself, and --debug works before or
after the command."""

from __future__ import annotations

import argparse

import pytest

from builder.commands.main import main, parser
from kbuild_common.errors import ManifestError


def walk(parser: argparse.ArgumentParser, path: tuple[str, ...] = ("kbuild",)):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helped = {a.dest for a in action._choices_actions}
            for name, sub in action.choices.items():
                yield path + (name,), "(the command itself)", name in helped
                yield from walk(sub, path + (name,))
        elif not isinstance(action, argparse._HelpAction):
            yield path, "/".join(action.option_strings) or action.dest, bool(action.help)


def test_every_command_and_argument_has_help():
    missing = [f"{' '.join(path)} {what}" for path, what, ok in walk(parser()) if not ok]
    assert missing == []
    assert sum(1 for _ in walk(parser())) > 60  # the walk really covers the subcommands


@pytest.mark.parametrize("before", [True, False])
def test_debug_before_or_after_the_command_shows_the_traceback(before, tmp_path):
    argv = ["--debug", "check", str(tmp_path)] if before else ["check", str(tmp_path), "--debug"]
    with pytest.raises(ManifestError, match="no build.toml here"):
        main(argv)


def test_without_debug_the_error_is_one_line(tmp_path, capsys):
    assert main(["check", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "no build.toml here" in err and "Traceback" not in err


def test_help_lists_the_commands_in_the_order_of_the_work(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    (sub,) = [a for a in parser()._actions if isinstance(a, argparse._SubParsersAction)]
    assert [a.dest for a in sub._choices_actions] == [
        "init", "check", "update-build", "variants", "build", "check-abi", "test", "bench", "check-layers", "publish",
        "reproduce", "verify", "matrix", "info", "lock", "download", "hub", "toolchain", "clean", "completion"]
    listed = [line.split()[0] for line in out.splitlines() if line.startswith("    ") and not line.startswith("     ")]
    assert listed == [a.dest for a in sub._choices_actions]
    assert "serve the local hub over the Hugging Face Hub HTTP API" in " ".join(out.split())
