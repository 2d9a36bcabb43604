"""The one place that runs subprocesses: logs the exact command, applies a timeout, and turns
failures into CommandError with the tail of the output."""

from __future__ import annotations

import logging
import os
import shlex
import subprocess
from pathlib import Path

from .errors import CommandError

log = logging.getLogger("kbuild.proc")


def run(
    cmd: list[str],
    *,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float | None = 600,
    check: bool = True,
    what: str | None = None,
) -> subprocess.CompletedProcess:
    """Run `cmd`, capturing stdout+stderr as text. `env` entries are added to os.environ."""
    log.debug("$ %s%s", _env_prefix(env), shlex.join(cmd))
    full_env = {**os.environ, **env} if env else None
    try:
        done = subprocess.run(cmd, cwd=cwd, env=full_env, timeout=timeout, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise CommandError(f"{what or cmd[0]}: command not found: {cmd[0]}", 127, "") from None
    except subprocess.TimeoutExpired as e:
        out = (e.output or b"").decode(errors="replace") if isinstance(e.output, bytes) else (e.output or "")
        raise CommandError(f"{what or cmd[0]} timed out after {timeout:.0f}s: {shlex.join(cmd)}", 124, tail(out)) from None
    if check and done.returncode != 0:
        raise CommandError(f"{what or cmd[0]} failed (exit {done.returncode}): {shlex.join(cmd)}",
                           done.returncode, tail(done.stdout))
    return done


def stream(cmd: list[str], *, cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.Popen:
    """Start `cmd` with line-buffered text stdout (stderr merged) for live progress."""
    log.debug("$ %s%s", _env_prefix(env), shlex.join(cmd))
    full_env = {**os.environ, **env} if env else None
    try:
        return subprocess.Popen(cmd, cwd=cwd, env=full_env, text=True, bufsize=1, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    except FileNotFoundError:
        raise CommandError(f"command not found: {cmd[0]}", 127, "") from None


def tail(text: str, lines: int = 30) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


def _env_prefix(env: dict[str, str] | None) -> str:
    return "".join(f"{k}={shlex.quote(v)} " for k, v in (env or {}).items())
