"""`kbuild variants` names the torch that builds each of this environment's variants exactly (its
release and the CUDA it was built for), not the versions table's release: run under two torch
releases, .venv's 2.14.1 (a CUDA build) and the Hugging Face environments' 2.13.0 CPU build
(tests/helpers/hf_envs.py). A stable-ABI kernel's one CPU variant is built by whichever torch runs,
so the table's newest release must not be named for it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import hf_envs
from builder.commands.main import main

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def torch_213() -> Path:
    """A Python with torch 2.13.0's CPU build (kernels 0.19's environment): it must run in CI, no skip."""
    try:
        return hf_envs.ensure("kernels-0.19")
    except hf_envs.EnvError as e:
        pytest.fail(str(e))


def here_rows(kernel: str, python: Path | None, capsys) -> list[dict]:
    argv = ["variants", str(ROOT / "kernels" / kernel), "--json"] + (["--python", str(python)] if python else [])
    assert main(argv) == 0
    return [r for r in json.loads(capsys.readouterr().out) if r.get("here")]


@pytest.mark.parametrize("kernel", ["rmsnorm", "activation"])
def test_variants_names_the_running_torch_under_two_releases(kernel, torch_213, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("KBUILD_CACHE", str(tmp_path / "cache"))
    for python, release, build in ((None, torch.__version__, f"CUDA {torch.version.cuda} build"
                                    if torch.version.cuda else "CPU build"),
                                   (torch_213, "2.13.0+cpu", "CPU build")):
        rows = [r for r in here_rows(kernel, python, capsys) if r["variant"].endswith("-cpu-x86_64-linux")]
        assert len(rows) == 1, rows
        (row,) = rows
        assert row["torch"] == release
        assert row["toolchain"].startswith(f"torch {release} ({build}, "), row
        if kernel == "rmsnorm":  # a classic variant is named by the torch that builds it
            assert row["variant"] == f"torch{release.split('.')[0]}{release.split('.')[1]}-cxx11-cpu-x86_64-linux"
        else:
            assert row["variant"] == "torch-stable-abi210-cpu-x86_64-linux"

    # the text form says it on the variant's line
    assert main(["variants", str(ROOT / "kernels" / kernel), "--python", str(torch_213)]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if "[this environment]" in line and "-cpu-" in line]
    assert len(lines) == 1 and "<- torch 2.13.0+cpu (CPU build, " in lines[0], lines
