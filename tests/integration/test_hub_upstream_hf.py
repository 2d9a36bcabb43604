"""Hugging Face's newest clients through a `kbuild hub serve --upstream` front (HF_ENDPOINT at the
front): kernels 0.19.1 `get_kernel` by version, branch and commit, a `LayerRepository` bound by
`kernelize` on the CPU, huggingface_hub's `snapshot_download` and transformers 5.25's `from_pretrained`
of a model; then the same loads, from a fresh client cache, with the upstream unreachable. Real hubs
on 127.0.0.1; the probe runs in the kernels-0.19 environment's own python (tests/helpers/front_probe.py)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from huggingface_hub import HfApi

import hf_envs
from hubserver import TOKEN, ServerThread
from kbuild_hub.server import Upstream
from layer_kernel import publish_layer_kernel

PROBE = Path(__file__).resolve().parents[1] / "helpers" / "front_probe.py"
ENV = "kernels-0.19"
KERNEL, MODEL = "kb-org/rmsnorm", "kb-org/tiny-llama"


@pytest.fixture(scope="module")
def python() -> Path:
    try:
        return hf_envs.ensure(ENV)
    except hf_envs.EnvError as e:
        pytest.fail(str(e))


def probe(python: Path, endpoint: str, home: Path, *args: str) -> dict:
    done = subprocess.run([str(python), str(PROBE), *args], env=hf_envs.client_env(endpoint, home), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("PROBE ")]
    return json.loads(line.removeprefix("PROBE "))


def test_kernels_019_and_transformers_525_through_the_front(python, tmp_path):
    upstream_root = tmp_path / "upstream"
    publish_layer_kernel(tmp_path / "rmsnorm", upstream_root, repo_id=KERNEL)
    up = ServerThread(upstream_root, trusted=("kb-org",))
    model_dir = tmp_path / "model"
    probe(python, up.url, tmp_path / "home0", "make-model", str(model_dir))
    api = HfApi(endpoint=up.url, token=TOKEN)
    api.create_repo(MODEL)
    api.upload_folder(repo_id=MODEL, folder_path=model_dir)
    sha = {b.name: b.target_commit for b in api.list_repo_refs(KERNEL, repo_type="kernel").branches}["v1"]
    front = ServerThread(tmp_path / "front", upstream=Upstream(up.url, connect_timeout=2, read_timeout=10))
    try:
        mark = len(up.logged())
        report = probe(python, front.url, tmp_path / "home1", "load", KERNEL, sha, MODEL, str(model_dir))
        assert report["installed"]["kernels"] == "0.19.1" and report["installed"]["transformers"] == "5.25.0"
        for how in ("version", "branch", "sha"):
            assert report[how]["version"] == 1, (how, report[how])
            assert f"/snapshots/{sha}/" in report[how]["file"], (how, report[how])  # the upstream's commit id
        assert report["layer_max_err"] < 1e-5
        assert report["logits_max_diff"] == 0.0
        assert any("/resolve/" in line for line in up.logged(mark))  # it did come from the upstream
    finally:
        front.stop()
        up.stop()
    # the upstream is gone: a fresh client cache loads the same through a front on the same folder
    offline = ServerThread(tmp_path / "front", upstream=Upstream("http://127.0.0.1:9", connect_timeout=1, read_timeout=1))
    try:
        again = probe(python, offline.url, tmp_path / "home2", "load", KERNEL, sha, MODEL, str(model_dir))
        assert again["sha"]["version"] == 1 and again["logits_max_diff"] == 0.0
        assert f"/snapshots/{sha}/" in again["version"]["file"]
    finally:
        offline.stop()
