"""One exception family for the builder; only the CLI catches it and renders one line."""

from __future__ import annotations


class KbuildError(Exception):
    """A failure the user can act on. `hint` says what to do next."""

    exit_code = 1

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.hint = hint


class ManifestError(KbuildError):
    """build.toml is malformed: the message names file, line, key and what was expected."""

    exit_code = 2


class UsageError(KbuildError):
    """A bad command-line argument."""

    exit_code = 2


class ToolchainError(KbuildError):
    """torch, nvcc or ninja is missing or does not fit."""

    exit_code = 3


class BuildError(KbuildError):
    """A compile or link step failed."""

    exit_code = 4


class CommandError(KbuildError):
    """A subprocess failed; carries the command line and the tail of its output."""

    exit_code = 5

    def __init__(self, message: str, returncode: int, output_tail: str, hint: str | None = None):
        super().__init__(message, hint)
        self.returncode = returncode
        self.output_tail = output_tail
