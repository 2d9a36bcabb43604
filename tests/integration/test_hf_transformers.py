"""Integration: Hugging Face's `kernels` 0.16.2, 0.17.2, 0.18.3 and 0.19.1, each with the transformers
release that pins it (5.17.0, 5.21.1, 5.24.0, 5.25.0; tests/helpers/hf_envs.py), load kbuild-built
kernels from a real `kbuild hub serve` on 127.0.0.1 (HF_ENDPOINT), on torch 2.13.0's CPU build:

- `kernels.get_kernel(repo, version=…)` and `(…, revision=<commit>)` run the published rmsnorm;
- transformers' kernelize binds our `RMSNorm` layer onto a tiny Llama's norms (its
  `@use_kernel_forward_from_hub("RMSNorm")`) through a kernels mapping to our repo;
- `attn_implementation="kb-org/flash-attn2@v3"` loads the real flash-attn2 CPU build
  (the kernel corpus, tests/helpers/corpus.py; built here, ~1 min) and a padded batch through the tiny Llama matches sdpa.

Each check holds the result against what was published: the file imported lies in the snapshot of
the commit `kbuild publish` reported, the kernel's own op ran (the profiler names it), the output
matches a reference. The probe runs in the environment's own python (tests/helpers/hf_probe.py).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement

import hf_envs
from corpus import corpus_kernel
from hubserver import TOKEN, ServerThread

REPO = Path(__file__).resolve().parents[2]
PROBE = Path(__file__).resolve().parents[1] / "helpers" / "hf_probe.py"
VARIANT = "torch213-cxx11-cpu-x86_64-linux"  # what hf_envs.TORCH builds (every environment holds it)
IGNORE = shutil.ignore_patterns("build", ".kbuild", "__pycache__", ".pytest_cache")
ENVS = list(hf_envs.PAIRS)


@pytest.fixture(scope="module")
def envs() -> dict[str, Path]:
    """Each environment's python; made here when ci/setup.sh has not (they must run in CI: no skip)."""
    try:
        return {name: hf_envs.ensure(name) for name in ENVS}
    except hf_envs.EnvError as e:
        pytest.fail(str(e))


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    server = ServerThread(tmp_path_factory.mktemp("hub"))
    yield server
    server.stop()


def committed_copy(src: Path, dest: Path) -> Path:
    """A copy in a fresh git repository, committed: kbuild names a build after its sources' commit,
    and publishes a clean one without --allow-dirty."""
    shutil.copytree(src, dest, ignore=IGNORE)
    git = ["git", "-C", str(dest), "-c", "user.name=kbuild-tests", "-c", "user.email=tests@kbuild.invalid",
           "-c", "commit.gpgsign=false"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "copy"]):
        subprocess.run([*git, *args], check=True, capture_output=True, timeout=120)
    return dest


def build_and_publish(kernel: Path, python: Path, hub: ServerThread, repo_id: str) -> dict:
    """`kbuild build --python` against the environment's torch, then `kbuild publish` over HTTP;
    returns the published commit and the variant's op namespace."""
    kbuild = [sys.executable, "-m", "builder.commands.main"]
    env = {**os.environ, "HF_TOKEN": TOKEN}
    done = subprocess.run([*kbuild, "build", str(kernel), "--python", str(python), "-j", "2"],
                          capture_output=True, text=True, env=env, timeout=1800)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert sorted(p.name for p in (kernel / "build").iterdir() if not p.name.startswith(".")) == [VARIANT]
    done = subprocess.run([*kbuild, "publish", str(kernel), "--hub", hub.url, "--repo-id", repo_id, "--json"],
                          capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    summary = json.loads(done.stdout)
    assert summary["variants"] == [VARIANT]
    op_namespace = json.loads((kernel / "build" / VARIANT / "metadata.json").read_text())["id"]
    return {"commit": summary["commit"], "branch": summary["branch"], "id": op_namespace}


@pytest.fixture(scope="module")
def rmsnorm(envs, hub, tmp_path_factory) -> dict:
    kernel = committed_copy(REPO / "kernels" / "rmsnorm", tmp_path_factory.mktemp("k") / "rmsnorm")
    return build_and_publish(kernel, envs[ENVS[-1]], hub, "kb-org/rmsnorm")


@pytest.fixture(scope="module")
def flash_attn2(envs, hub, tmp_path_factory) -> dict:
    kernel = committed_copy(corpus_kernel("flash-attn2"), tmp_path_factory.mktemp("k") / "flash-attn2")
    return build_and_publish(kernel, envs[ENVS[-1]], hub, "kb-org/flash-attn2")


def probe(name: str, python: Path, hub: ServerThread, home: Path, *args: str) -> dict:
    """tests/helpers/hf_probe.py in the environment, with a fresh HF cache: everything comes over HTTP."""
    env = hf_envs.client_env(hub.url, home)
    before = len(hub.logged())
    done = subprocess.run([str(python), str(PROBE), *args], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("PROBE ")]
    report = json.loads(line.removeprefix("PROBE "))
    report["requests"] = hub.logged(before)  # the server's log lines of this probe's requests
    # the environment holds its pins, and a CPU torch: a CUDA build would send the loader to CUDA variants
    for pin in hf_envs.requirements(name):
        req = Requirement(pin)
        if req.name in report["installed"]:
            assert req.specifier.contains(report["installed"][req.name]), (pin, report["installed"])
    assert report["torch_cuda"] is None
    assert report["transformers_takes_kernels"], f"transformers {report['installed']['transformers']} refuses " \
        f"kernels {report['installed']['kernels']}"
    return report


def snapshot_file(home: Path, repo_id: str, commit: str, name: str) -> str:
    """Where huggingface_hub puts a file of `commit` of a kernel repo under HF_HOME."""
    repo_cache = home / "hub" / f"kernels--{repo_id.replace('/', '--')}"
    return str(repo_cache / "snapshots" / commit / "build" / VARIANT / name)


def fetched(report: dict, repo_id: str, kernel: dict) -> bool:
    """The probe downloaded the variant's library from the server, at the published commit."""
    so = f"GET /kernels/{repo_id}/resolve/{kernel['commit']}/build/{VARIANT}/{kernel['id']}.abi3.so 200 "
    return any(line.startswith(so) for line in report["requests"])


@pytest.mark.parametrize("name", ENVS)
def test_get_kernel_by_version_and_revision(name, envs, hub, rmsnorm, tmp_path):
    home = tmp_path / "hf-home"
    report = probe(name, envs[name], hub, home, "get-kernel", "kb-org/rmsnorm", "1", rmsnorm["commit"])
    for how in ("version", "revision"):
        got = report[how]
        assert got["file"] == snapshot_file(home, "kb-org/rmsnorm", rmsnorm["commit"], "__init__.py"), (how, got)
        assert got["module"] == rmsnorm["id"]
        assert got["ops"] == [f"{rmsnorm['id']}::rms_norm"], (how, got)
        assert got["max_err"] < 1e-5, (how, got)
    assert fetched(report, "kb-org/rmsnorm", rmsnorm), report["requests"]


@pytest.mark.parametrize("name", ENVS)
def test_transformers_kernelize_binds_the_hub_layer(name, envs, hub, rmsnorm, tmp_path):
    home = tmp_path / "hf-home"
    report = probe(name, envs[name], hub, home, "layer", "kb-org/rmsnorm", "1", "RMSNorm")
    # kernelize falls back to the original forward when a kernel does not load (transformers 5.21
    # asks it to): the bound forward's module says whether ours replaced it
    assert report["forward_module"] == f"{rmsnorm['id']}.layers", report
    assert report["file"] == snapshot_file(home, "kb-org/rmsnorm", rmsnorm["commit"], "layers.py"), report
    assert report["ops"] == [f"{rmsnorm['id']}::rms_norm"], report
    assert report["max_err"] < 1e-4, report
    assert fetched(report, "kb-org/rmsnorm", rmsnorm), report["requests"]


@pytest.mark.parametrize("name", ENVS)
def test_transformers_attn_implementation_from_the_hub(name, envs, hub, flash_attn2, tmp_path):
    home = tmp_path / "hf-home"
    implementation = f"kb-org/flash-attn2@{flash_attn2['branch']}"
    report = probe(name, envs[name], hub, home, "attention", implementation)
    assert report["attn_implementation"] == implementation, report
    assert report["files"] == [snapshot_file(home, "kb-org/flash-attn2", flash_attn2["commit"], "__init__.py")], report
    assert f"{flash_attn2['id']}::varlen_fwd" in report["ops"], report
    # bfloat16 logits of about 0.5 against sdpa's: ~0.005 here; a wrong softmax scale gives ~0.2,
    # a wrong causal flag or no attention at all ~0.5 (tried with such kernels)
    assert report["max_err"] <= 2e-2, report
    assert fetched(report, "kb-org/flash-attn2", flash_attn2), report["requests"]
