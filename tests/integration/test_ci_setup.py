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


def test_a_disk_too_small_for_torch_stops_before_pip_saying_how_much_is_needed(tmp_path):
    """On a disk with 64 MB free, step 2 (torch's CUDA build) stops at once with the sizes, instead
    of pip's "No space left on device" minutes into the install (a CI disk shared with other jobs)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mount = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(disk)], capture_output=True, text=True)
    if mount.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here (needs root): {mount.stderr.strip()}")
    try:
        (disk / "ci").mkdir()
        (disk / "kbuild").mkdir()
        for name in ("ci/setup.sh", "pyproject.toml", "kbuild/__init__.py"):
            (disk / name).write_bytes((REPO / name).read_bytes())
        done = subprocess.run(["bash", "ci/setup.sh"], cwd=disk, capture_output=True, text=True, timeout=300)
        assert done.returncode == 1, done.stdout + done.stderr
        assert "[2/5] torch " in done.stdout and "[3/5]" not in done.stdout, done.stdout
        (message,) = done.stderr.splitlines()
        assert message.startswith(f"ci/setup.sh: step 2 (torch's CUDA build and kbuild's test extra, 5.8 GB) needs about 7 GB free on {disk}, "
                                  "only 0 GB is (df -h .): make room and run it again (log: .venv/setup-logs/"), message
        assert not (disk / ".venv" / "lib" / "python3.11" / "site-packages" / "torch").exists()
    finally:
        subprocess.run(["umount", str(disk)], check=True)
