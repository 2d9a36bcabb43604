"""Shared fixtures and the slow marker. Nothing here is autouse: integration tests spawn processes on
purpose; tests/unit/conftest.py makes no_subprocess autouse for the unit tests."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from slow_uses import slow_reason

UNIT = Path(__file__).resolve().parent / "unit"


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by mark
def pytest_collection_modifyitems(items):
    """A test is slow by what it uses (tests/helpers/slow_uses.py), never by a hand-written mark.
    Unit tests are left alone: they start no process (tests/unit/conftest.py), so they compile
    nothing; a `build` they run stops at its one-line error."""
    for item in items:
        function = getattr(item, "function", None)
        if function is None or UNIT in item.path.parents:
            continue
        if slow_reason(function, item.fixturenames):
            item.add_marker(pytest.mark.slow)


class SubprocessInPureTest(AssertionError):
    """A unit test that promised to be pure started a process."""


@pytest.fixture
def no_subprocess(monkeypatch):
    """Fail the test if it starts a process. Opt in with
    `pytestmark = pytest.mark.usefixtures("no_subprocess")` (unit tests are pure)."""

    def refuse(*args, **kwargs):
        raise SubprocessInPureTest(f"a pure unit test tried to start a process: {args[:1]!r}")

    # Popen's own hook, so `from subprocess import Popen` and subprocess.run are caught too.
    monkeypatch.setattr(subprocess.Popen, "_execute_child", refuse)
    for name in ("system", "popen", "fork", "forkpty", "posix_spawn", "posix_spawnp",
                 "execv", "execve", "execvp", "execvpe", "spawnv", "spawnve", "spawnvp", "spawnvpe"):
        if hasattr(os, name):
            monkeypatch.setattr(os, name, refuse)


@pytest.fixture(scope="session")
def torch213_python(tmp_path_factory):
    """torch 2.13.0's CPU build provisioned through kbuild's toolchain store in a session folder
    (the store installs pip's default build: the CPU wheel is put in pip's sight, where PyPI's
    would be a CUDA build), plus pytest and numpy — made once per session for the tests that build
    or load against an older torch."""
    import hf_envs
    from builder.toolchains.provision import ToolchainStore
    from kbuild_common.errors import KbuildError

    try:
        wheels = hf_envs.cpu_torch_wheel("2.13.0").parent
        with pytest.MonkeyPatch.context() as patch:  # its local version (+cpu) sorts above PyPI's 2.13.0
            patch.setenv("PIP_FIND_LINKS", " ".join(filter(None, (str(wheels), os.environ.get("PIP_FIND_LINKS")))))
            store = tmp_path_factory.mktemp("toolchains")
            python = ToolchainStore(store).torch_python("2.13.0")
    except (KbuildError, hf_envs.EnvError) as e:
        pytest.skip(f"torch 2.13.0's CPU build is not installable here: {e}")
    pip = subprocess.run([python, "-m", "pip", "install", "-q", "--no-cache-dir", "pytest", "numpy"],
                         capture_output=True, text=True, timeout=1800)
    if pip.returncode != 0:
        pytest.skip(f"pytest/numpy are not installable here: {pip.stdout[-300:]}{pip.stderr[-300:]}")
    hf_envs.link_identical_files(store, [hf_envs.HOME])  # torch 2.13's files are hf-envs/_torch's: 0.6 GB
    return Path(python)
