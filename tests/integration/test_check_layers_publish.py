"""Integration, end to end (issue 50): the real `kbuild check-layers` on tests/fixtures/layer-check
(transformers 5.25 of the kernels-0.19 environment, torch 2.13.0 CPU), then `kbuild publish` to a
local hub, then the kernel page of `kbuild hub serve` and `kbuild info`: the verdict the check
wrote (forward agrees, backward differs) and the first layer quantity that differs, as published.
A rebuild after the check makes the record stale: the next publish leaves it out in one line and
drops the one on the branch."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import hf_envs
from hubserver import ServerThread

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "layer-check"
KBUILD = [sys.executable, "-m", "builder.commands.main"]
VARIANT = "torch213-cxx11-cpu-x86_64-linux"


def kbuild(*args: str, timeout: int = 1800) -> subprocess.CompletedProcess:
    done = subprocess.run([*KBUILD, *args], capture_output=True, text=True, timeout=timeout)
    assert "Traceback" not in done.stdout + done.stderr, done.stdout + done.stderr
    return done


def test_a_real_check_is_published_and_shown(tmp_path):
    try:
        python = hf_envs.ensure("kernels-0.19")
    except hf_envs.EnvError as e:
        pytest.fail(str(e))
    kernel = tmp_path / "layer-check"
    shutil.copytree(FIXTURE, kernel, ignore=shutil.ignore_patterns("build", ".kbuild", "__pycache__"))
    (kernel / ".gitignore").write_text("build/\n.kbuild/\n")
    git = ["git", "-C", str(kernel), "-c", "user.name=kbuild-tests", "-c", "user.email=tests@kbuild.invalid",
           "-c", "commit.gpgsign=false"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "copy"]):
        subprocess.run([*git, *args], check=True, capture_output=True, timeout=120)
    done = kbuild("build", str(kernel), "--python", str(python), "-j", "2")
    assert done.returncode == 0, done.stderr[-3000:]
    done = kbuild("check-layers", str(kernel), "--python", str(python), "--map", "rotary_pos_emb=RotaryInPlace",
                  "--mode", "training")
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]  # the gradient differs
    record = json.loads((kernel / ".kbuild" / VARIANT / "layer-check.json").read_text())
    assert record["verdict"] == {"forward": True, "backward": False}

    hub = tmp_path / "hub"
    done = kbuild("publish", str(kernel), "--hub", str(hub), "--repo-id", "org/layer-check", "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout)["layer_checks"] == [VARIANT]

    verdict = (f"layers checked against transformers {record['transformers']} (torch {record['torch']}, cpu): "
               "forward ✓ backward ✗")
    differs = "rotary_pos_emb (RotaryInPlace): grad of q differs, rel 0.77"
    server = ServerThread(hub)
    try:
        status, _, body = server.raw("GET", "/org/layer-check")
    finally:
        server.stop()
    assert status == 200 and verdict in body.decode() and differs in body.decode(), body.decode()[-3000:]
    done = kbuild("info", "org/layer-check", "--hub", str(hub), "--backend", "cpu")
    assert done.returncode == 0 and verdict in done.stdout and differs in done.stdout, done.stdout + done.stderr

    # rebuilt since the check (a change committed): the record is of an earlier build
    (kernel / "README.md").write_text("changed\n")
    for args in (["add", "-A"], ["commit", "-q", "-m", "change"]):
        subprocess.run([*git, *args], check=True, capture_output=True, timeout=120)
    assert kbuild("build", str(kernel), "--python", str(python), "-j", "2").returncode == 0
    done = kbuild("publish", str(kernel), "--hub", str(hub), "--repo-id", "org/layer-check", "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout)
    assert summary["layer_checks"] == [] and f"layer-checks/{VARIANT}.json" in summary["deleted"]
    assert f"{VARIANT}: layer check not published:" in done.stderr and "is of an earlier build" in done.stderr
