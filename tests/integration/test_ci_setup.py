"""ci/setup.sh as a rerun finds it (CI runs it before the tests, so here it has nothing left to do):
every step printed, the rerun saying it had nothing to do, each run's log kept beside the earlier
ones, and `--check` agreeing. A first run's work is CI's own first step (`.ci/run`, on a fresh
machine), which fails the job when a step fails."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LOGS = REPO / ".venv" / "setup-logs"


def setup(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "ci/setup.sh", *args], cwd=REPO, capture_output=True, text=True, timeout=600)


def test_a_rerun_prints_each_step_says_it_had_nothing_to_do_and_keeps_each_log():
    check = setup("--check")
    if check.returncode == 1:  # an edit of pyproject.toml since the last run, say: a rerun would install
        pytest.skip(f"ci/setup.sh has work to do here, run it first: {check.stdout.splitlines()[-1]}")
    assert check.returncode == 0 and check.stdout.splitlines()[-1] == "ci/setup.sh --check: nothing to do", check
    before = set(LOGS.glob("*.log")) if LOGS.is_dir() else set()

    done = setup()
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert [line[:5] for line in lines if line.startswith("[")] == ["[1/5]", "[2/5]", "[3/5]", "[4/5]", "[5/5]"]
    assert "ci/setup.sh: nothing to do: every step was already in place" in lines, done.stdout
    assert lines[-1].startswith("kbuild env ready: torch "), done.stdout
    # its own log, named in its first line; the earlier runs' logs are still there
    log = REPO / lines[0].removeprefix("ci/setup.sh: log of this run: ")
    assert log.parent == LOGS and log not in before and log.is_file(), lines[0]
    assert "== [5/5] Hugging Face environments" in log.read_text()
    assert all(p.exists() for p in sorted(before)[-19:])  # with this one, the newest 20 stay


def test_an_unknown_argument_is_one_line_and_exit_2():
    done = setup("--bogus")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == "ci/setup.sh: unknown argument '--bogus' (expected nothing or --check)\n"
