"""bench/gpu/harness.sh, the set-up the device harnesses share, run here without a GPU (issue 47, item 5):
bash accepts every harness; a missing carried folder or wheel is one line naming it, before anything is
set up; a hub token file is 0600; `kbuild` is a command that `timeout` can run; what goes back to $OUT
is counted. tests/unit/test_gpu_harness.py reads the scripts as text."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
GPU = REPO / "bench" / "gpu"
SCRIPTS = sorted(GPU.glob("*.sh"))


def bash(script: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"  # `python` is this one
    return subprocess.run(["bash", "-c", script], cwd=cwd, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PATH": path, **env})


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_bash_reads_every_harness(script):
    done = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


@pytest.fixture
def checkout(tmp_path) -> Path:
    """A checkout holding the harness and one script that needs two carried folders."""
    root = tmp_path / "checkout"
    (root / "bench" / "gpu").mkdir(parents=True)
    (root / "bench" / "gpu" / "harness.sh").write_text((GPU / "harness.sh").read_text())
    (root / "bench" / "gpu" / "x.sh").write_text(
        "#!/usr/bin/env bash\n# carry: .device/wheels .device/kc (the kernels)\nset -uo pipefail\n"
        "source bench/gpu/harness.sh || exit 1\ncarried || exit 1\necho set-up starts\n"
        'wheels "$@" || exit 1\necho installed\n')
    return root


def test_a_folder_not_carried_is_one_line_before_any_set_up(checkout):
    done = bash("bash bench/gpu/x.sh", checkout)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == "x.sh: not carried: .device/wheels .device/kc (name it in the run's carry list)\n"
    # the same check here, at no device time, by the harness run on its own
    alone = bash("bash bench/gpu/harness.sh bench/gpu/x.sh", checkout)
    assert (alone.returncode, alone.stderr) == (1, done.stderr)

    (checkout / ".device" / "kc").mkdir(parents=True)
    (checkout / ".device" / "wheels").mkdir()
    assert bash("bash bench/gpu/harness.sh bench/gpu/x.sh", checkout).stdout == "x.sh: its carry line is all here\n"
    missing = bash("bash bench/gpu/x.sh liger_kernel", checkout)
    assert (missing.returncode, missing.stdout) == (1, "set-up starts\n")
    assert missing.stderr == "x.sh: no .device/wheels/liger_kernel*.whl (carry .device/wheels with it)\n"


def test_the_shared_set_up_runs(checkout, tmp_path):
    out, snap, bin_ = tmp_path / "out", tmp_path / "snap", tmp_path / "bin"
    (checkout / "kernel").mkdir()
    (checkout / "kernel" / "build.toml").write_text("[general]\n")
    for n in range(8):
        (checkout / f"f{n}").write_text("x")
    done = bash("""set -u; source bench/gpu/harness.sh
        snapshot && pwd
        hub_token a.token b.token && cat a.token b.token
        as_repo kernel && git -C kernel log --format=%s
        say built
        bring_back f0 f1 f2 f3 f4 f5 f6 f7 missing && bring_back_tgz rest.tgz kernel build.toml
        ls "$OUT" | tr '\\n' ' '
        """, checkout, OUT=str(out), HARNESS_SNAP=str(snap), HARNESS_BIN=str(bin_))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == str(snap) and (snap / "kernel" / "build.toml").is_file()  # the copy, and cd there
    token = lines[1]
    assert token.startswith("kb_") and len(token) == 35 and lines[2] == token
    assert all(stat.S_IMODE((snap / f).stat().st_mode) == 0o600 for f in ("a.token", "b.token"))
    assert lines[3] == "kernel"  # one commit, named after its folder
    assert lines[4].endswith("s] built") and lines[4].startswith("[")
    assert lines[5].endswith("9 files under $OUT: the device tool brings back 8 (put the rest into an archive)")
    assert lines[6].split() == [*(f"f{n}" for n in range(8)), "rest.tgz"]  # the missing one skipped


def test_kbuild_is_a_command_that_timeout_runs(tmp_path):
    done = bash("source bench/gpu/harness.sh && device_env && timeout 60 kbuild --version && echo $NCCL_NVLS_ENABLE",
                REPO, HARNESS_BIN=str(tmp_path / "bin"))
    assert done.returncode == 0, done.stderr
    version, nvls = done.stdout.splitlines()
    assert version.startswith("kbuild ") and nvls == "0"  # NVLink multicast off, as the lent machines want
