"""`seen`: a Python-only kernel with a noarch variant for each of five backends (cpu, cuda, rocm,
xpu, metal; they build in about a second), for the tests of which variants `kbuild test` and
`kbuild bench` run here and with which devices in view (tests/integration/test_kbuild_test_truth.py,
tests/integration/test_bench.py). Its suite and its benchmark write what their process saw (the
GPU variables, torch's CUDA device count, the device it chose) into records/<variant>.json, which
the tests read."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

BUILD_TOML = """[general]
name = "seen"
version = 1
edition = 5
license = "Apache-2.0"
backends = ["cpu", "cuda", "rocm", "xpu", "metal"]

[torch-noarch]
"""
PACKAGE = '''import torch


def on_the_gpu():
    return torch.zeros(1, device="cuda")  # the variant's own code asks for a GPU
'''
# what a record holds besides torch's device count and the device the suite or benchmark chose
WATCHED = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ZE_AFFINITY_MASK", "ONEAPI_DEVICE_SELECTOR",
           "KBUILD_TEST_DEVICE", "TRITON_INTERPRET")
# what kbuild sets to hide every GPU from a CPU variant's process (variant_choice.HIDE_GPUS), spelled out
HIDDEN = {"CUDA_VISIBLE_DEVICES": "", "HIP_VISIBLE_DEVICES": "", "ZE_AFFINITY_MASK": "",
          "ONEAPI_DEVICE_SELECTOR": "opencl:cpu"}


def build_seen(root: Path, files: dict[str, str]) -> Path:
    """The kernel in root/seen with `files` beside its own (its suite, its benchmark), built by
    `kbuild build` (slow_uses.py marks its callers)."""
    from builder.commands.main import main

    kernel = root / "seen"
    for rel, text in {"build.toml": BUILD_TOML, "torch-ext/seen/__init__.py": PACKAGE, **files}.items():
        (kernel / rel).parent.mkdir(parents=True, exist_ok=True)
        (kernel / rel).write_text(text)
    assert main(["build", str(kernel)]) == 0
    return kernel


def fresh_copy(built: Path, into: Path, monkeypatch) -> Path:
    """A copy of the built kernel `built` in `into`, with an empty records/; the caller's GPU
    variables unset, so the records show only what kbuild set."""
    for name in (*HIDDEN, "TRITON_INTERPRET", "SEEN_VARIANT_GPU", "KBUILD_GPU_ARCH"):
        monkeypatch.delenv(name, raising=False)
    copy = into / "seen"
    shutil.copytree(built, copy, ignore=shutil.ignore_patterns(".kbuild", "__pycache__"))
    (copy / "records").mkdir()
    return copy


def seen(kernel: Path) -> dict[str, dict]:
    """Each variant's record: what its suite or benchmark saw."""
    return {p.stem: json.loads(p.read_text()) for p in (kernel / "records").glob("*.json")}
