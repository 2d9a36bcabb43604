"""The one place that runs subprocesses: traces the exact command (shown with -v), applies a timeout, and turns
failures into CommandError with the tail of the output."""

from __future__ import annotations

import io
import os
import shlex
import subprocess
import tempfile
from pathlib import Path
from typing import BinaryIO, cast

from kbuild_common.errors import CommandError
from kbuild_common.notices import trace


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
    trace(f"$ {_env_prefix(env)}{shlex.join(cmd)}")
    full_env = {**os.environ, **env} if env else None
    try:
        done = subprocess.run(cmd, cwd=cwd, env=full_env, timeout=timeout, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise CommandError(f"{what or cmd[0]}: command not found: {cmd[0]}", 127, "") from None
    except subprocess.TimeoutExpired as e:
        out = (e.output or b"").decode(errors="replace") if isinstance(e.output, bytes) else (e.output or "")
        raise CommandError(f"{what or cmd[0]} timed out after {timeout:.0f}s: {shlex.join(cmd)}", 124,
                           tail(out)) from None
    if check and done.returncode != 0:
        raise CommandError(f"{what or cmd[0]} failed (exit {done.returncode}): {shlex.join(cmd)}",
                           done.returncode, tail(done.stdout))
    return done


def run_logged(cmd: list[str], log_file: Path, *, cwd: Path | None = None, env: dict[str, str] | None = None,
               timeout: float | None = 3600) -> int | None:
    """Run `cmd` with stdout and stderr going straight into `log_file` while it runs, so a run that
    is killed or times out keeps what it printed; its exit code, None when it timed out (killed)."""
    trace(f"$ {_env_prefix(env)}{shlex.join(cmd)} > {log_file}")
    full_env = {**os.environ, **env} if env else None
    with open(log_file, "wb") as out:
        try:
            child = subprocess.Popen(cmd, cwd=cwd, env=full_env, stdin=subprocess.DEVNULL, stdout=out,
                                     stderr=subprocess.STDOUT)
        except FileNotFoundError:
            raise CommandError(f"command not found: {cmd[0]}", 127, "") from None
        try:
            return child.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
            return None


def stream(cmd: list[str], *, cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.Popen:
    """Start `cmd` with line-buffered text stdout (stderr merged) for live progress."""
    trace(f"$ {_env_prefix(env)}{shlex.join(cmd)}")
    full_env = {**os.environ, **env} if env else None
    try:
        return subprocess.Popen(cmd, cwd=cwd, env=full_env, text=True, bufsize=1, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    except FileNotFoundError:
        raise CommandError(f"command not found: {cmd[0]}", 127, "") from None


def run_bytes(
    cmd: list[str],
    *,
    input: bytes | None = None,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float | None = 600,
    what: str | None = None,
) -> bytes:
    """Run `cmd` with binary stdin/stdout and return stdout; stderr goes to the error's tail."""
    trace(f"$ {_env_prefix(env)}{shlex.join(cmd)}")
    full_env = {**os.environ, **env} if env else None
    stdin = subprocess.DEVNULL if input is None else None  # run() refuses stdin beside input
    try:
        done = subprocess.run(cmd, cwd=cwd, env=full_env, timeout=timeout, capture_output=True, input=input,
                              stdin=stdin)
    except FileNotFoundError:
        raise CommandError(f"{what or cmd[0]}: command not found: {cmd[0]}", 127, "") from None
    except subprocess.TimeoutExpired as e:
        raise CommandError(f"{what or cmd[0]} timed out after {timeout:.0f}s: {shlex.join(cmd)}", 124,
                           tail((e.stderr or b"").decode(errors="replace"))) from None
    if done.returncode != 0:
        raise CommandError(f"{what or cmd[0]} failed (exit {done.returncode}): {shlex.join(cmd)}",
                           done.returncode, tail(done.stderr.decode(errors="replace")))
    return done.stdout


def open_bytes(cmd: list[str], *, cwd: Path | None = None, env: dict[str, str] | None = None,
               what: str | None = None) -> BinaryIO:
    """Start `cmd` and return its stdout as a binary stream. Reading to the end raises CommandError
    if the command failed (so a truncated stream never passes as complete); closing early kills it."""
    trace(f"$ {_env_prefix(env)}{shlex.join(cmd)}")
    full_env = {**os.environ, **env} if env else None
    errors = tempfile.TemporaryFile()  # a file, not a pipe: a chatty stderr cannot block stdout
    try:
        child = subprocess.Popen(cmd, cwd=cwd, env=full_env, bufsize=0, stdin=subprocess.DEVNULL,
                                 stdout=subprocess.PIPE, stderr=errors)
    except FileNotFoundError:
        errors.close()
        raise CommandError(f"{what or cmd[0]}: command not found: {cmd[0]}", 127, "") from None
    return io.BufferedReader(_ProcessReader(child, errors, what or cmd[0], cmd), buffer_size=1 << 20)


class _ProcessReader(io.RawIOBase):
    def __init__(self, child: subprocess.Popen, errors: BinaryIO, what: str, cmd: list[str]):
        self._child, self._errors, self._what, self._cmd = child, errors, what, cmd
        self._stdout = cast(io.RawIOBase, child.stdout)  # a pipe with bufsize=0: a raw FileIO

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        n = self._stdout.readinto(buffer)
        if not n and self._child.wait() != 0:
            self._errors.seek(0)
            raise CommandError(f"{self._what} failed (exit {self._child.returncode}): {shlex.join(self._cmd)}",
                               self._child.returncode, tail(self._errors.read().decode(errors="replace")))
        return n

    def close(self) -> None:
        if not self.closed:
            if self._child.poll() is None:
                self._child.kill()
            self._stdout.close()
            self._child.wait()
            self._errors.close()
        super().close()


def tail(text: str, lines: int = 30) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


def _env_prefix(env: dict[str, str] | None) -> str:
    return "".join(f"{k}={shlex.quote(v)} " for k, v in (env or {}).items())
