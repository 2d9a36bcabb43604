"""Shared fixtures. Nothing here is autouse: integration tests spawn processes on purpose."""

from __future__ import annotations

import os
import subprocess

import pytest


class SubprocessInPureTest(AssertionError):
    """A unit test that promised to be pure started a process."""


@pytest.fixture
def no_subprocess(monkeypatch):
    """Fail the test if it starts a process. Opt in with
    `pytestmark = pytest.mark.usefixtures("no_subprocess")` (STYLE.md §14: unit tests are pure)."""

    def refuse(*args, **kwargs):
        raise SubprocessInPureTest(f"a pure unit test tried to start a process: {args[:1]!r}")

    # Popen's own hook, so `from subprocess import Popen` and subprocess.run are caught too.
    monkeypatch.setattr(subprocess.Popen, "_execute_child", refuse)
    for name in ("system", "popen", "fork", "forkpty", "posix_spawn", "posix_spawnp",
                 "execv", "execve", "execvp", "execvpe", "spawnv", "spawnve", "spawnvp", "spawnvpe"):
        if hasattr(os, name):
            monkeypatch.setattr(os, name, refuse)
