"""A model written for Hugging Face's layer API runs unchanged on kbuild's: the same script
(tests/helpers/layer_api_model.py) runs once on `kernels` (0.17.2, 0.18.3 and 0.19.1, each in its own
environment, torch 2.13.0 CPU: tests/helpers/hf_envs.py) and once on kbuild, both against one `kbuild hub serve` on
127.0.0.1 holding the layer kernel published over HTTP, and both must report the same: which
layer each module runs in every mode, outputs and gradients, versions, mapping contexts, the
fallback cases and the kind of error each misuse raises."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import hf_envs
from hubserver import TOKEN, ServerThread
from layer_kernel import publish_layer_kernel
from runtime_hubs import runtime_env, torch_probes

__all__ = ["runtime_env", "torch_probes"]  # fixtures, used by name

REPO = Path(__file__).resolve().parents[2]
MODEL = Path(__file__).resolve().parents[1] / "helpers" / "layer_api_model.py"
# 0.16's LayerRepository has no trust_remote_code to pass
ENVS = ["kernels-0.17", "kernels-0.18", "kernels-0.19"]
# Where kernels' layer semantics moved after 0.17 and kbuild's keep 0.17's, each named so that any
# other difference fails: 0.18+ give each module instance its own wrapper of a function layer (the
# decorated function itself is not rebound: `runs(axpy)` is False there); 0.19 binds a layer
# registered for TRAINING that has no backward instead of refusing it (its eager mode check is gone)
MOVED = {
    "kernels-0.17": {"kernelized": None, "kernelized_funcs": None},  # get_kernelized_layers came in 0.18
    "kernels-0.18": {"function": [False, True, ["Axpy"], True]},
    "kernels-0.19": {"function": [False, True, ["Axpy"], True], "registered_training_without_backward": "none"},
}


@pytest.fixture
def hub(tmp_path, monkeypatch, runtime_env):
    server = ServerThread(tmp_path / "hub-root")
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    publish_layer_kernel(tmp_path / "rmsnorm", server.url, repo_id="kb-org/rmsnorm", versions=(1, 2))
    monkeypatch.delenv("HF_TOKEN")
    yield server.url
    server.stop()


def run_model(python: Path, library: str, hub: str, home: Path) -> dict:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("KBUILD_", "HF_", "HUGGING", "KERNELS_", "TRANSFORMERS_", "LOCAL_KERNELS"))}
    # no HF_HUB_DISABLE_TELEMETRY: kernels 0.17.2 then sends a User-Agent httpx refuses (see
    # test_hf_transformers.py); nothing leaves 127.0.0.1 either way
    env.update(HF_ENDPOINT=hub, HF_HOME=str(home / "hf"), KBUILD_CACHE=str(home / "kbuild"),
               HF_HUB_DISABLE_PROGRESS_BARS="1", PYTHONPATH=str(REPO))
    done = subprocess.run([str(python), str(MODEL), library, "kb-org/rmsnorm"], capture_output=True, text=True,
                          env=env, cwd=home, timeout=600)
    assert done.returncode == 0, f"{library}:\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("env", ENVS)
def test_the_same_model_script_behaves_the_same_on_kernels_and_on_kbuild(env, hub, tmp_path):
    try:
        hf_python = hf_envs.ensure(env)
    except hf_envs.EnvError as e:
        pytest.fail(str(e))
    (tmp_path / "hf-run").mkdir()
    (tmp_path / "kb-run").mkdir()
    theirs = run_model(hf_python, "kernels", hub, tmp_path / "hf-run")
    ours = run_model(Path(sys.executable), "kbuild", hub, tmp_path / "kb-run")
    # what the scenarios must show at all (so that agreeing on nothing cannot pass)
    assert theirs["inference"] == ["RMSNorm", "Unmapped", True]
    assert theirs["by_mode"] == ["NormNoBackward", "RMSNorm", "ModelNorm"]
    assert theirs["versions"] == [1, 2, 1]
    assert ours["function"] == [True, True, ["Axpy"], True] and theirs["function_unmapped"] is False
    assert ours["kernelized"] == [["norm", "RMSNorm", True]]
    assert ours["kernelized_funcs"] == [["0", "Axpy", "Axpy"], ["1", "Axpy", "Axpy"]]
    assert ours.keys() == theirs.keys()
    assert {k: v for k, v in theirs.items() if ours[k] != v} == MOVED[env]
