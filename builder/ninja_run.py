"""Run ninja over the generated graph, feeding progress to the reporter and collecting
the output of each failed step for its variant's log."""

from __future__ import annotations

import re
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import proc
from .errors import ToolchainError

_STATUS = re.compile(r"^\[(\d+)/(\d+)\] (.*)$")


@dataclass
class NinjaOutcome:
    returncode: int
    steps_run: int
    compiles_run: int
    failed_outputs: dict[str, str] = field(default_factory=dict)  # output path -> its error text
    finished_at: dict[str, float] = field(default_factory=dict)  # output path -> seconds since start
    log: str = ""


def ninja_binary() -> str:
    # The ninja from PyPI (its BIN_DIR, or next to this interpreter); the PATH one is a fallback.
    try:
        import ninja

        candidates = [Path(ninja.BIN_DIR) / "ninja"]
    except (ImportError, AttributeError):
        candidates = []
    candidates.append(Path(sys.executable).parent / "ninja")
    for path in candidates:
        if path.is_file():
            return str(path)
    found = shutil.which("ninja")
    if not found:
        raise ToolchainError("ninja not found", hint="pip install ninja")
    return found


def run_ninja(ninja_file: Path, targets: list[str], jobs: int | None, reporter,
              env: dict[str, str] | None = None) -> NinjaOutcome:
    cmd = [ninja_binary(), "-f", str(ninja_file), "-k", "0"]
    if jobs:
        cmd += ["-j", str(jobs)]
    cmd += targets
    start = time.monotonic()
    child = proc.stream(cmd, cwd=ninja_file.parent, env={**(env or {}), "NINJA_STATUS": "[%f/%t] "})
    outcome = NinjaOutcome(0, 0, 0)
    lines: list[str] = []
    failed: str | None = None
    started = False
    for raw in child.stdout:
        line = raw.rstrip("\n")
        lines.append(line)
        if m := _STATUS.match(line):
            done, total, what = int(m[1]), int(m[2]), m[3]
            if not started:
                reporter.start_jobs(total, "compiling")
                started = True
            outcome.steps_run = done
            outcome.compiles_run += what.startswith(("CXX", "NVCC"))
            reporter.job_done(done, total, what)
            failed = None
            continue
        if line.startswith("FAILED: "):
            failed = re.sub(r"^\[code=\d+\] ", "", line[len("FAILED: "):]).split(" ")[0]
            outcome.failed_outputs[failed] = ""
            continue
        if failed is not None:
            outcome.failed_outputs[failed] += line + "\n"
        reporter.compiler_output(line)
    child.stdout.close()
    outcome.returncode = child.wait()
    reporter.stop_jobs()
    outcome.log = "\n".join(lines)
    outcome.finished_at["*"] = time.monotonic() - start
    return outcome
