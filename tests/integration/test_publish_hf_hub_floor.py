"""Publishing over HTTP with a huggingface_hub too old to commit to kernel repos (before 2.3 its
create_commit refuses repo_type="kernel"; transformers 5.17 pins it below 2.0, as on the H200's
image) is one line naming the release needed, before anything is written; the same publish with
this environment's huggingface_hub lands."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cpu_kernel import write_cpu_kernel
from hubserver import TOKEN, ServerThread

ROOT = Path(__file__).resolve().parents[2]
OLD = "1.33.0"  # the last 1.x, what transformers 5.17's pin (<2.0) resolves to


@pytest.fixture(scope="module")
def old_hf_hub(tmp_path_factory) -> Path:
    """huggingface_hub 1.33.0 and the httpx it talks through (PyPI), to put first on sys.path."""
    target = tmp_path_factory.mktemp("hf-hub-1.33")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target),
                    f"huggingface_hub=={OLD}", "httpx<1", "httpcore<2"], check=True)
    return target


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    root = write_cpu_kernel(tmp_path_factory.mktemp("floor") / "okk", "okk", "int okk_value() { return 1; }\n")
    for args in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@localhost", "commit", "-qm", "v1"]):
        subprocess.run(["git", "-C", str(root), *args], check=True)
    subprocess.run([sys.executable, "-m", "builder.commands.main", "build", str(root)], cwd=ROOT, check=True,
                   capture_output=True)
    return root


def publish(project: Path, hub: str, pythonpath: list[Path]) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("KBUILD_HUB", "HF_ENDPOINT")}
    env.update(HF_TOKEN=TOKEN, PYTHONPATH=os.pathsep.join(map(str, [*pythonpath, ROOT])))
    return subprocess.run([sys.executable, "-m", "builder.commands.main", "publish", str(project), "--repo-id", "me/okk",
                           "--hub", hub], cwd=ROOT, env=env, capture_output=True, text=True)


def test_an_old_huggingface_hub_is_refused_before_anything_is_written(old_hf_hub, built, tmp_path):
    from huggingface_hub import HfApi

    server = ServerThread(tmp_path / "hub")
    try:
        old = publish(built, server.url, [old_hf_hub])
        api = HfApi(endpoint=server.url, token=TOKEN)
        created = api.repo_exists("me/okk", repo_type="kernel")
        new = publish(built, server.url, [])
        refs = api.list_repo_refs("me/okk", repo_type="kernel")
    finally:
        server.stop()
    assert old.returncode == 3, old.stderr
    assert "Traceback" not in old.stderr
    errors = [line for line in old.stderr.splitlines() if line.startswith("kbuild: error:")]
    assert len(errors) == 1 and f"needs huggingface_hub >= 2.3 (kernel repos), this Python has {OLD}" in errors[0]
    assert not created  # refused before the repo was made
    assert new.returncode == 0, new.stderr  # this environment's huggingface_hub publishes the same build
    assert "v1" in {b.name for b in refs.branches}
