"""The way code that holds no Reporter speaks to the user (manifest parsing, provisioning, the
subprocess runner, the hub's store): `notice()` for a warning, `trace()` for what `-v` shows.

Everything kbuild prints goes through the running command's Reporter (builder/report.py): the
CLI installs it here with `reporting(reporter)` for the length of a command, so a notice is shown
live, in the same style, on the same stream as the rest. Used as a library (tests, bench/, a
Python caller) there is no Reporter: a notice is then a Python warning (`BuildNotice`, a
UserWarning the caller may filter or record) and a trace is dropped.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Protocol


class BuildNotice(UserWarning):
    """A kbuild warning raised where no Reporter is installed."""


class Sink(Protocol):
    verbose: bool

    def info(self, message: str) -> None: ...

    def warn(self, message: str) -> None: ...


_sink: ContextVar[Sink | None] = ContextVar("kbuild_reporter", default=None)


@contextmanager
def reporting(sink: Sink) -> Iterator[None]:
    """Send notices and traces to `sink` (the command's Reporter) inside the block."""
    token = _sink.set(sink)
    try:
        yield
    finally:
        _sink.reset(token)


def notice(message: str) -> None:
    """A warning for the user: the Reporter's `warn`, or a BuildNotice without one."""
    sink = _sink.get()
    if sink is None:
        warnings.warn(message, BuildNotice, stacklevel=3)  # points at the caller of the caller
    else:
        sink.warn(message)


def trace(message: str) -> None:
    """A detail for `-v` (the exact commands run): shown only by a verbose Reporter."""
    sink = _sink.get()
    if sink is not None and sink.verbose:
        sink.info(message)
