"""One exception family for the builder; only the CLI catches it and renders one line. Every
exit code kbuild's commands return is named here (ExitCode), and the README lists them."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    FAILED = 1  # a variant failed to build, its tests failed or could not be collected; any other error
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
    """build.toml is malformed: the message names file, line, key and what was expected.
    `errors` holds every error found in the file (this one alone, or several: ManifestError.of)."""

    exit_code = ExitCode.USAGE

    def __init__(self, message: str, hint: str | None = None, line: int | None = None):
        super().__init__(message, hint)
        self.line = line  # where in the file, for putting several errors in file order
        self.errors: tuple[ManifestError, ...] = (self,)

    @classmethod
    def of(cls, errors: list[ManifestError]) -> ManifestError:
        """One error for all of `errors` (each may hold several): str() is one line per error, and
        the CLI prints each as its own error line."""
        found = tuple(one for e in errors for one in e.errors)
        if len(found) == 1:
            return found[0]
        combined = cls("\n".join(str(e) for e in found), hint=next((e.hint for e in found if e.hint), None))
        combined.errors = found
        return combined


class UsageError(KbuildError):
    """A bad command-line argument."""

    exit_code = ExitCode.USAGE


class ToolchainError(KbuildError):
    """torch, nvcc or ninja is missing or does not fit."""

    exit_code = ExitCode.TOOLCHAIN


class BuildError(KbuildError):
    """A compile or link step failed."""

    exit_code = ExitCode.BUILD


class LockError(KbuildError):
    """kbuild lock or download could not resolve, fetch or verify a kernel."""

    exit_code = ExitCode.LOCK


class CommandError(KbuildError):
    """A subprocess failed; carries the command line and the tail of its output."""

    exit_code = ExitCode.COMMAND

    def __init__(self, message: str, returncode: int, output_tail: str, hint: str | None = None):
        super().__init__(message, hint)
        self.returncode = returncode
        self.output_tail = output_tail
