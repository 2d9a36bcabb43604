"""CI jobs publish slices of one version in parallel (issue 10, finding 6): 8 `kbuild publish
--variant <one each>` processes at once, to a repo that does not exist yet, on a local hub and
through `kbuild hub serve`; every one exits 0 and the branch ends holding every slice, each
matching its digest."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kbuild.digest import digest_tree
from tiny_kernel import build, git, kernel  # noqa: F401  (fixture)

SLICES = 8


def slices(root: Path, n: int = SLICES) -> list[str]:
    """n variant folders made from the built torch-cuda one, each its own name and digest (a
    matrix's variants without compiling a matrix)."""
    names = []
    for i in range(n):
        name = f"torch-slice{i}"
        target = root / "build" / name
        shutil.copytree(root / "build" / "torch-cuda", target)
        (target / "slice.py").write_text(f"SLICE = {i}\n")
        meta = json.loads((target / "metadata.json").read_text())
        meta["digest"]["files"] = digest_tree(target)
        (target / "metadata.json").write_text(json.dumps(meta, indent=2))
        names.append(name)
    return names


def publish_at_once(root: Path, hub: str, names: list[str], env: dict) -> list[tuple[int, str]]:
    procs = [subprocess.Popen([sys.executable, "-m", "builder.commands.main", "publish", str(root), "--hub", hub,
                               "--variant", name], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True) for name in names]
    results = []
    for p in procs:
        with p.stdout:  # closed when read: no pipe left for the garbage collector to warn about
            output = p.stdout.read()
        results.append((p.wait(timeout=600), output))
    return results


def check_branch(files: dict[str, bytes], names: list[str]) -> None:
    """Every slice is on the branch, each file matching its variant's digest."""
    for name in names:
        meta = json.loads(files[f"build/{name}/metadata.json"])
        for rel, digest in meta["digest"]["files"].items():
            blob = files[f"build/{name}/{rel}"]
            assert base64.b64encode(hashlib.sha256(blob).digest()).decode() == digest, (name, rel)
        assert files[f"build/{name}/slice.py"] == f"SLICE = {name[len('torch-slice'):]}\n".encode()


def subprocess_env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("KBUILD_HUB", "HF_ENDPOINT")}
    return {**env, "HF_HUB_DISABLE_PROGRESS_BARS": "1", **extra}


def test_eight_slices_published_at_once_to_a_local_hub_all_land(kernel, tmp_path):  # noqa: F811
    build(kernel)
    names = slices(kernel)
    hub = tmp_path / "hub"
    results = publish_at_once(kernel, str(hub), names, subprocess_env())
    failed = [out for code, out in results if code]
    assert not failed, f"{len(failed)} of {SLICES} failed:\n" + "\n".join(failed)
    bare = hub / "kernels" / "org" / "tiny.git"
    listed = git(bare, "ls-tree", "-r", "--name-only", "v1").split()
    files = {path: subprocess.run(["git", "show", f"v1:{path}"], cwd=bare, capture_output=True, check=True).stdout
             for path in listed}
    check_branch(files, names)
    assert git(bare, "rev-list", "--count", "main..v1").strip() == str(SLICES)  # one commit each, none lost


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from hubserver import ServerThread

    running = ServerThread(tmp_path_factory.mktemp("served"))
    yield running
    running.stop()


def test_eight_slices_published_at_once_over_http_all_land(kernel, server, tmp_path):  # noqa: F811
    from huggingface_hub import HfApi

    from hubserver import TOKEN

    build(kernel)
    names = slices(kernel)
    results = publish_at_once(kernel, server.url, names,
                              subprocess_env(HF_TOKEN=TOKEN, HF_HOME=str(tmp_path / "hf-home")))
    failed = [out for code, out in results if code]
    assert not failed, f"{len(failed)} of {SLICES} failed:\n" + "\n".join(failed)
    api = HfApi(endpoint=server.url)
    listed = api.list_repo_files("org/tiny", revision="v1", repo_type="kernel")
    from huggingface_hub import hf_hub_download

    files = {path: Path(hf_hub_download("org/tiny", path, revision="v1", repo_type="kernel", endpoint=server.url,
                                        cache_dir=tmp_path / "dl")).read_bytes()
             for path in listed if path.startswith("build/")}
    check_branch(files, names)
