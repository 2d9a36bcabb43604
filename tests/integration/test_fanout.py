"""CI fan-out, simulated (issue 13): `kbuild matrix --slices N --github` cuts the first-party
matrix into slices; N concurrent processes, each in its own clone with its own kbuild cache (a
runner each), build and publish their slice to one `kbuild hub serve` on 127.0.0.1; the final job's
`kbuild matrix --check` finds the branch complete, every variant verified and loadable. The check
run before the last slice lands names what is missing."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from redis_server import free_port

REPO = Path(__file__).resolve().parents[2]
TOKEN = "kb_fanout_token"
# torch 2.14 (this environment's CUDA build) and CUDA 13.0 only: nothing to provision
MATRIX = '[workspace]\nmembers = ["kernels/*"]\n\n[workspace.matrix]\ntorch = ["2.14"]\ncuda = ["13.0"]\n'


def kbuild(*args: str, cwd: Path, cache: Path, timeout: int = 1200) -> subprocess.CompletedProcess:
    env = {**os.environ, "KBUILD_CACHE": str(cache), "HF_TOKEN": TOKEN, "CI": "1", "PYTHONPATH": str(REPO)}
    for name in ("KBUILD_HUB", "HF_ENDPOINT", "CCACHE_DIR", "KBUILD_REMOTE_CACHE", "KBUILD_TOOLCHAINS"):
        env.pop(name, None)
    return subprocess.run([sys.executable, "-m", "builder.commands.main", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture
def origin(tmp_path) -> Path:
    """The project every runner clones: the first-party kernels, their CUDA sections for sm_80 only
    (the fan-out is what is tested, not nvcc), committed."""
    root = tmp_path / "origin"
    root.mkdir()
    (root / "build.toml").write_text(MATRIX)
    for name in ("activation", "rmsnorm", "rotary"):
        shutil.copytree(REPO / "kernels" / name, root / "kernels" / name,
                        ignore=shutil.ignore_patterns("build", ".kbuild", "__pycache__"))
        toml = root / "kernels" / name / "build.toml"
        toml.write_text(toml.read_text().replace('backend = "cuda"\n', 'backend = "cuda"\ncuda-capabilities = ["8.0"]\n'))
    git = ["git", "-c", "user.email=ci@localhost", "-c", "user.name=ci"]
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    subprocess.run([*git, "commit", "-qm", "kernels"], cwd=root, check=True)
    return root


@pytest.fixture
def hub_url(tmp_path):
    """`kbuild hub serve` as its own process, with a write token."""
    root = tmp_path / "hub"
    root.mkdir()
    (root / ".token").write_text(TOKEN + "\n")
    (root / ".token").chmod(0o600)
    port = free_port()
    log = (tmp_path / "serve.log").open("wb")
    server = subprocess.Popen([sys.executable, "-m", "builder.commands.main", "hub", "serve", "--root", str(root),
                               "--port", str(port), "--token-file", str(root / ".token")],
                              stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONPATH": str(REPO)})
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{url}/api/models/none/none", timeout=2)
            except urllib.error.HTTPError:
                break  # it answers
            except OSError:
                assert server.poll() is None, (tmp_path / "serve.log").read_text()
                assert time.monotonic() < deadline, "kbuild hub serve did not answer within 60 s"
                time.sleep(0.2)
            else:
                break
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()


def run_slices(slices: list[dict], origin: Path, hub: str, tmp_path: Path) -> None:
    """One runner per slice, all at once: clone, build the slice, publish it."""
    runners = []
    for entry in slices:
        home = tmp_path / f"runner{entry['slice']}"
        subprocess.run(["git", "clone", "-q", str(origin), str(home / "src")], check=True)
        variants = [a for name in entry["variants"].split() for a in ("--variant", name)]
        script = (f"{shlex.join([sys.executable, '-m', 'builder.commands.main', 'build', '.', *variants])} && "
                  f"{shlex.join([sys.executable, '-m', 'builder.commands.main', 'publish', '.', *variants, '--hub', hub])}")
        env = {**os.environ, "KBUILD_CACHE": str(home / "cache"), "HF_TOKEN": TOKEN, "CI": "1",
               "PYTHONPATH": str(REPO)}
        for name in ("KBUILD_HUB", "HF_ENDPOINT", "CCACHE_DIR", "KBUILD_REMOTE_CACHE", "KBUILD_TOOLCHAINS"):
            env.pop(name, None)
        runners.append(subprocess.Popen(["bash", "-c", script], cwd=home / "src", env=env, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True))
    for entry, runner in zip(slices, runners, strict=True):
        out, _ = runner.communicate(timeout=1800)
        assert runner.returncode == 0, f"slice {entry['slice']} ({entry['variants']}):\n{out[-4000:]}"


def test_slices_publish_the_whole_matrix_to_one_branch(origin, hub_url, tmp_path):
    done = kbuild("matrix", ".", "--slices", "3", "--github", cwd=origin, cache=tmp_path / "planner")
    assert done.returncode == 0, done.stderr
    slices = json.loads(done.stdout)["include"]
    assert len(slices) == 3 and all(s["variants"] for s in slices)
    names = [n for s in slices for n in s["variants"].split()]
    assert len(names) == len(set(names)) == 5  # every variant name of the matrix, once
    assert set(names) == {"torch-stable-abi210-cpu-x86_64-linux", "torch-stable-abi210-cu130-x86_64-linux",
                          "torch214-cxx11-cpu-x86_64-linux", "torch214-cxx11-cu130-x86_64-linux", "torch-cuda"}

    *first, last = slices
    run_slices(first, origin, hub_url, tmp_path)
    early = kbuild("matrix", ".", "--check", "--hub", hub_url, cwd=origin, cache=tmp_path / "checker1")
    assert early.returncode == 1, early.stdout + early.stderr
    missing = re.findall(r"^missing\s+(\S+)@v1 \(\w+\) (\S+)$", early.stdout, re.M)
    expected = {(f"kbuild/{k}", v) for v in last["variants"].split() for k in last["kernels"].split()
                if (k, v) in KERNEL_VARIANTS}
    assert set(missing) == expected, early.stdout

    run_slices([last], origin, hub_url, tmp_path)
    final = kbuild("matrix", ".", "--check", "--hub", hub_url, cwd=origin, cache=tmp_path / "checker2")
    assert final.returncode == 0, final.stdout + final.stderr
    verified = re.findall(r"^verified\s+(\S+)@v1 \(\w+\) (\S+)$", final.stdout, re.M)
    assert set(verified) == {(f"kbuild/{k}", v) for k, v in KERNEL_VARIANTS}
    loaded = re.findall(r"^loaded\s+(\S+)@v1", final.stdout, re.M)
    assert sorted(loaded) == ["kbuild/activation", "kbuild/rmsnorm", "kbuild/rotary"]


KERNEL_VARIANTS = {
    ("activation", "torch-stable-abi210-cpu-x86_64-linux"), ("activation", "torch-stable-abi210-cu130-x86_64-linux"),
    ("rmsnorm", "torch214-cxx11-cpu-x86_64-linux"), ("rmsnorm", "torch214-cxx11-cu130-x86_64-linux"),
    ("rotary", "torch-cuda"),
}
