"""kbuild's layer API on transformers' own Qwen3: kbuild.kernelize binds a kernel's RMSNorm onto
every norm and its RotaryPosEmb onto the apply_rotary_pos_emb function layer the attention modules
carry, whether Hugging Face's `kernels` marked them (transformers 5.17 with kernels 0.16, its own
environment: tests/helpers/hf_envs.py) or kbuild's decorators did (the same script where `kernels`
is missing). The kernel is tests/helpers/layer_kernel.py's, built with the real CLI; the script is
tests/helpers/qwen3_kernelized.py."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

import hf_envs
from layer_kernel import publish_layer_kernel

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "tests" / "helpers" / "qwen3_kernelized.py"


def run(python: Path, kernel: Path, *, without_kernels: bool) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KBUILD_", "HF_", "KERNELS_", "TRANSFORMERS_"))}
    env.update(PYTHONPATH=str(REPO), HF_HUB_OFFLINE="1", KBUILD_CACHE=str(kernel.parent / "kbuild-cache"))
    # transformers marks its layers only when it can import `kernels`: hide it to get the other case
    prelude = "import sys; sys.modules['kernels'] = None; " if without_kernels else ""
    code = f"{prelude}import runpy, sys; sys.argv = [{str(SCRIPT)!r}, {str(kernel)!r}]; " \
           f"runpy.run_path({str(SCRIPT)!r}, run_name='__main__')"
    done = subprocess.run([str(python), "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("marks", ["kernels", "kbuild"])
def test_kbuild_kernelizes_qwen3s_norms_and_rotary_function(marks, tmp_path):
    try:
        python = hf_envs.ensure("kernels-0.16")  # transformers 5.17, kernels 0.16.2, torch 2.13 CPU
    except hf_envs.EnvError as e:
        pytest.fail(str(e))
    kernel = publish_layer_kernel(tmp_path / "layers", tmp_path / "hub").root
    report = run(python, kernel, without_kernels=marks == "kbuild")
    assert report["marked_by"] == marks
    # one function layer, carried by both attention modules, bound to the kernel's layer
    assert report["rotary_layers"] == 1 and report["rotary_runs"] == ["RotaryPosEmb.forward"], report
    # each forward: 2 layers x (input, post-attention, q, k norms) + the final norm; one rotary per layer
    assert report["norms"] == 9 and report["calls"] == {"RMSNorm": 9, "RotaryPosEmb": 2}, report
    assert report["logits_match"] and report["grads_match"], report
