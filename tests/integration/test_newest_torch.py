"""The newest torch, built for and loaded: kernels/rmsnorm and kernels/activation built with the
torch of an environment, published to a real `kbuild hub serve`, then loaded in that environment by
kbuild's loader and by Hugging Face's kernels (`backend="cpu"`, kernels' own rule for a CUDA torch
without a GPU), each running its op.

The environment: in CI, tests/helpers/hf_envs.py's pinned `torch-2.15` (torch 2.15.0, PyPI's CUDA
13.2 wheel with its nvidia-* libraries, and kernels 0.19.1; ci/setup.sh step 5 makes it, or this
file does when it is missing, and fails when it cannot), so an upstream release cannot turn CI red.
`nox -s canary` names its own instead, with the newest torch, kernels and transformers the index
has, in KBUILD_NEWEST_TORCH_PYTHON.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import hf_envs
from hubserver import TOKEN, ServerThread

REPO = Path(__file__).resolve().parents[2]
PROBE = Path(__file__).resolve().parents[1] / "helpers" / "hf_formats_probe.py"
ORG = "kb-newest"
IGNORE = shutil.ignore_patterns("build", ".kbuild", "__pycache__", ".pytest_cache")
PINNED = "torch-2.15"  # hf_envs.OWN_TORCH: its pins live there


@pytest.fixture(scope="module")
def python() -> str:
    """The canary's newest environment when it names one, else the pinned one (made here if missing: no skip)."""
    if os.environ.get("KBUILD_NEWEST_TORCH_PYTHON"):
        return os.environ["KBUILD_NEWEST_TORCH_PYTHON"]
    try:
        return str(hf_envs.ensure(PINNED))
    except hf_envs.EnvError as e:
        pytest.fail(str(e))


def run(*args: str, env: dict | None = None, timeout: int = 1800) -> str:
    done = subprocess.run(list(args), capture_output=True, text=True, env=env, timeout=timeout)
    assert done.returncode == 0, (args, done.stdout[-3000:] + done.stderr[-3000:])
    return done.stdout


def kbuild(*args: str) -> str:
    return run(sys.executable, "-m", "builder.commands.main", *args, env={**os.environ, "HF_TOKEN": TOKEN})


@pytest.fixture(scope="module")
def newest(python) -> dict:
    """That environment's torch as kbuild's runtime describes it, and the CPU variant names it gets."""
    script = ("import json, torch; from kbuild.variants import detect_system\n"
              "s = detect_system('cpu')\n"
              "print(json.dumps({'torch': torch.__version__, 'cpu': s.compiled_variant().name, "
              "'fits': detect_system().fitting_build().name}))")
    out = run(python, "-c", script, env={**os.environ, "PYTHONPATH": str(REPO)})
    return json.loads(out.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    server = ServerThread(tmp_path_factory.mktemp("hub"), trusted=(ORG,))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def published(python, newest, hub, tmp_path_factory) -> dict[str, dict]:
    root = tmp_path_factory.mktemp("kernels")
    variants = {"rmsnorm": newest["cpu"], "activation": "torch-stable-abi210-cpu-x86_64-linux"}
    out = {}
    for name, variant in variants.items():
        project = shutil.copytree(REPO / "kernels" / name, root / name, ignore=IGNORE)
        git = ["git", "-C", str(project), "-c", "user.name=kbuild-tests", "-c", "user.email=tests@kbuild.invalid",
               "-c", "commit.gpgsign=false"]
        for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "kernel"]):
            run(*git, *args)
        kbuild("build", str(project), "--python", python, "--variant", variant, "-j", "2")
        meta = json.loads((project / "build" / variant / "metadata.json").read_text())
        repo_id = f"{ORG}/{name}"
        kbuild("publish", str(project), "--hub", hub.url, "--repo-id", repo_id, "--variant", variant)
        out[name] = {"repo": repo_id, "variant": variant, "meta": meta}
    return out


def test_the_newest_torch_is_in_the_versions_table(newest):
    """A release the table lacks fails here in one line (kbuild toolchain check-index prints its rows)."""
    from builder.plan.matrix import full_matrix

    release = newest["torch"].split("+")[0]
    series = tuple(int(p) for p in release.split(".")[:2])
    known = {r.series: r.version for r in full_matrix().torch}
    assert series in known, f"builder/versions.toml lacks torch {release} (kbuild toolchain check-index prints its rows)"


def test_its_cpu_variant_is_built_with_that_torch(newest, published):
    release = newest["torch"].split("+")[0]
    assert newest["cpu"] == f"torch{release.split('.')[0]}{release.split('.')[1]}-cxx11-cpu-x86_64-linux"
    assert newest["fits"] == newest["cpu"]  # a CUDA torch without a GPU here: its CPU build is what fits
    for built in published.values():
        assert built["meta"]["provenance"]["toolchain"]["torch"]["version"] == newest["torch"], built["meta"]


def test_kbuild_loads_them_in_the_newest_torch(python, published, hub, tmp_path):
    script = (
        "import json, sys, torch, kbuild\n"
        "out = {}\n"
        "for repo in sys.argv[2:]:\n"
        "    k = kbuild.get_kernel(repo + '@v1', hub=sys.argv[1])\n"
        "    x = torch.randn(4, 16)\n"
        "    if hasattr(k, 'silu_and_mul'):\n"
        "        err = (k.silu_and_mul(x) - torch.nn.functional.silu(x[..., :8]) * x[..., 8:]).abs().max().item()\n"
        "    else:\n"
        "        w = torch.randn(16)\n"
        "        want = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w\n"
        "        err = (k.rms_norm(x, w, 1e-6) - want).abs().max().item()\n"
        "    out[repo] = {'file': k.__file__, 'err': err}\n"
        "print(json.dumps(out))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO), "KBUILD_CACHE": str(tmp_path / "cache"),
           "HF_HOME": str(tmp_path / "hf"), "KBUILD_TRUSTED_ORGS": f"{ORG}@{hub.url}"}
    got = json.loads(run(python, "-c", script, hub.url, *(b["repo"] for b in published.values()),
                         env=env).strip().splitlines()[-1])
    for built in published.values():
        assert f"/{built['variant']}/" in got[built["repo"]]["file"], got
        assert got[built["repo"]]["err"] < 1e-4, got


@pytest.mark.parametrize("name", ["rmsnorm", "activation"])
def test_hugging_faces_kernels_loads_them_in_the_newest_torch(name, python, published, hub, tmp_path):
    built = published[name]
    done = subprocess.run([python, str(PROBE), "load", built["repo"], "1"], env=hf_envs.client_env(hub.url, tmp_path),
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("PROBE ")]
    report = json.loads(line.removeprefix("PROBE "))
    assert "error" not in report, report
    assert report["module"] == built["meta"]["id"], report
    assert f"/build/{built['variant']}/" in report["file"], report
    if name == "activation":
        assert report["max_err"] < 1e-5, report
