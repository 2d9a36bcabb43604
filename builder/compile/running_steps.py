"""Which of ninja's steps are running now, for the live view: ninja names a step only once it has
finished, so the processes it started (Linux's /proc) are asked what they produce (`-o OUTPUT`).
Elsewhere nothing is reported, and the view shows finished steps only."""

from __future__ import annotations

import itertools
import shlex
import threading
import time
from collections.abc import Callable
from pathlib import Path

POLL_S = 0.5


class RunningSteps(threading.Thread):
    """Calls `report([(status line, monotonic start), ...])` every POLL_S while ninja (`pid`)
    runs; `outputs` maps each step's output path to its status line (ninja_file.Graph.outputs)."""

    def __init__(self, pid: int, outputs: dict[str, str], cwd: Path,
                 report: Callable[[list[tuple[str, float]]], None]):
        super().__init__(name="kbuild-running-steps", daemon=True)
        self._pid, self._outputs, self._cwd, self._report = pid, outputs, cwd, report
        self._done = threading.Event()

    def run(self) -> None:
        seen: dict[int, tuple[str, float] | None] = {}  # child pid -> its step (None: not one of ours)
        while not self._done.wait(POLL_S):
            children = _children(self._pid)
            now = time.monotonic()
            seen = {pid: seen[pid] if pid in seen else self._step(pid, now) for pid in children}
            self._report([step for step in seen.values() if step])

    def stop(self) -> None:
        self._done.set()
        if self.is_alive():
            self.join()

    def _step(self, pid: int, now: float) -> tuple[str, float] | None:
        args = _command(pid)
        for flag, value in itertools.pairwise(args):
            if flag == "-o":
                line = self._outputs.get(value) or self._outputs.get(str(self._cwd / value))
                if line:
                    return line, now
        return None


def _children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except (OSError, ValueError):
        return []  # not Linux, or ninja has exited


def _command(pid: int) -> list[str]:
    """The arguments of ninja's child: `/bin/sh -c COMMAND` split as the shell does, or what the
    shell exec'd in its place."""
    try:
        argv = [a.decode(errors="replace") for a in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:-1]]
    except OSError:
        return []
    if len(argv) == 3 and argv[1] == "-c":
        try:
            return shlex.split(argv[2])
        except ValueError:
            return []
    return argv
