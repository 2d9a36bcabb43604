"""Run ninja over the generated graph, feeding progress to the reporter and collecting
the output of each failed step for its variant's log."""

from __future__ import annotations

import re
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from builder.compile.running_steps import RunningSteps
from kbuild_common import proc
from kbuild_common.errors import ToolchainError

_STATUS = re.compile(r"^\[(\d+)/(\d+)\] (.*)$")


@dataclass
class NinjaOutcome:
    returncode: int
    steps_run: int
    compiles_run: int
    failed_outputs: dict[str, str] = field(default_factory=dict)  # output path -> its error text
    finished_at: dict[str, float] = field(default_factory=dict)  # output path -> seconds since start
    log: str = ""
    step_times: dict[str, tuple[int, int]] = field(default_factory=dict)  # output -> (start, end) ms
    steps: list[tuple[str, tuple[str, ...], str]] = field(default_factory=list)  # (status line, its variants, output)

    def variant_seconds(self, outputs: set[str]) -> float:
        """Wall time from the first to the last step ninja ran for these outputs in this run."""
        spans = [self.step_times[o] for o in outputs if o in self.step_times]
        return (max(e for _, e in spans) - min(s for s, _ in spans)) / 1000 if spans else 0.0

    def variant_log(self, variant: str, outputs: set[str]) -> str:
        """The status lines and compiler output of this variant's steps (a compile shared with
        another variant too), then its failures."""
        mine = [f"{line}\n{text}" for line, variants, text in self.steps if variant in variants]
        failed = [f"FAILED: {o}\n{t}" for o, t in self.failed_outputs.items() if o in outputs]
        return "".join(mine) + "".join(failed)


def ninja_binary() -> str:
    # The ninja from PyPI (its BIN_DIR, or next to this interpreter); the PATH one is a fallback.
    try:
        import ninja  # noqa: PLC0415 - optional: the PATH's ninja when PyPI's is not installed

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
              env: dict[str, str] | None = None, owners: dict[str, tuple[str, ...]] | None = None,
              outputs: dict[str, str] | None = None) -> NinjaOutcome:
    """Run the graph; `owners` (from ninja_file.render) names the variants of each step's status
    line, `outputs` the status line of each output (for the steps running now)."""
    cmd = [ninja_binary(), "-f", str(ninja_file), "-k", "0"]
    if jobs:
        cmd += ["-j", str(jobs)]
    cmd += targets
    ninja_log = ninja_file.parent / ".ninja_log"
    log_size = ninja_log.stat().st_size if ninja_log.is_file() else 0
    start = time.monotonic()
    # shown from the start: the first status line comes only when a step has finished
    reporter.start_jobs("compiling")
    try:
        child = proc.stream(cmd, cwd=ninja_file.parent, env={**(env or {}), "NINJA_STATUS": "[%f/%t] "})
        watch = RunningSteps(child.pid, outputs or {}, ninja_file.parent, reporter.running)
        watch.start()
        try:
            outcome, lines = _read(child, reporter, owners or {})
        finally:
            watch.stop()
    finally:
        reporter.stop_jobs()
    outcome.log = "\n".join(lines)
    outcome.finished_at["*"] = time.monotonic() - start
    outcome.step_times = _new_log_entries(ninja_log, log_size)
    return outcome


def _read(child, reporter, owners: dict[str, tuple[str, ...]]) -> tuple[NinjaOutcome, list[str]]:
    """ninja's output to its end: progress to the reporter, each step's output and failures kept."""
    outcome = NinjaOutcome(0, 0, 0)
    lines: list[str] = []
    failed: str | None = None
    for raw in child.stdout:
        line = raw.rstrip("\n")
        lines.append(line)
        if m := _STATUS.match(line):
            done, total, what = int(m[1]), int(m[2]), m[3]
            outcome.steps_run = done
            outcome.compiles_run += not what.startswith("LINK ")  # a step that does not link compiles, any rule
            variants = owners.get(what, ())
            reporter.job_done(done, total, what, variants[0] if variants else None)
            outcome.steps.append((what, variants, ""))
            failed = None
            continue
        if line.startswith("FAILED: "):
            failed = re.sub(r"^\[code=\d+\] ", "", line[len("FAILED: "):]).split(" ")[0]
            outcome.failed_outputs[failed] = ""
            continue
        if failed is not None:
            outcome.failed_outputs[failed] += line + "\n"
        elif outcome.steps:
            what, variants, text = outcome.steps[-1]
            outcome.steps[-1] = (what, variants, text + line + "\n")
        reporter.compiler_output(line)
    child.stdout.close()
    outcome.returncode = child.wait()
    return outcome, lines


def _new_log_entries(ninja_log: Path, offset: int) -> dict[str, tuple[int, int]]:
    """The steps this run appended to .ninja_log: `start end mtime output hash`, times in ms
    since ninja started. A recompacted log starts over with its header: read it whole then."""
    try:
        with ninja_log.open("rb") as f:
            if f.seek(0, 2) < offset:
                offset = 0
            f.seek(offset)
            text = f.read().decode(errors="replace")
    except OSError:
        return {}
    times = {}
    for line in text.splitlines():
        parts = line.split("\t")
        if len(parts) == 5 and parts[0].isdigit() and parts[1].isdigit():
            times[parts[3]] = (int(parts[0]), int(parts[1]))
    return times
