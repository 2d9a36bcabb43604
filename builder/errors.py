"""One exception family for the builder; only the CLI catches it and renders one line. Every
exit code kbuild's commands return is named here (ExitCode), and the README lists them."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    FAILED = 1  # a variant failed to build or its tests failed; any other error
    USAGE = 2  # a malformed build.toml or a bad argument
    TOOLCHAIN = 3  # torch, nvcc, ninja, a sysroot or CUTLASS missing or unfit
    BUILD = 4  # a compile or link step could not run
    COMMAND = 5  # a subprocess (git, pip, ...) failed
    HUB = 6  # the hub refused or failed a request
    REFUSED = 7  # publish refused: stale, dirty, partial or tampered builds
    LOCK = 8  # kbuild lock could not resolve or verify a kernel


class KbuildError(Exception):
    """A failure the user can act on. `hint` says what to do next."""

    exit_code = ExitCode.FAILED

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.hint = hint


class ManifestError(KbuildError):
    """build.toml is malformed: the message names file, line, key and what was expected."""

    exit_code = ExitCode.USAGE


class UsageError(KbuildError):
    """A bad command-line argument."""

    exit_code = ExitCode.USAGE


class ToolchainError(KbuildError):
    """torch, nvcc or ninja is missing or does not fit."""

    exit_code = ExitCode.TOOLCHAIN


class BuildError(KbuildError):
    """A compile or link step failed."""

    exit_code = ExitCode.BUILD


class CommandError(KbuildError):
    """A subprocess failed; carries the command line and the tail of its output."""

    exit_code = ExitCode.COMMAND

    def __init__(self, message: str, returncode: int, output_tail: str, hint: str | None = None):
        super().__init__(message, hint)
        self.returncode = returncode
        self.output_tail = output_tail
