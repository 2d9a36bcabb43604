"""Toolchain provisioning (builder/toolchains/provision.py, `kbuild toolchain`) with real pip and real wheels.

The slow tests install NVIDIA's cuda-toolkit 13.2 wheels (~330 MB, seconds) and use the session's
torch 2.13.0 CPU environment (tests/conftest.py's torch213_python, made by the same store). The
CUDA build of torch (~3 GB with its dependencies) is never downloaded here.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from builder.backends.cuda_toolkit import find_cuda
from builder.backends.cuda_wheels import cuda_home
from builder.commands.main import main
from builder.toolchains.provision import MARKER, ToolchainStore
from builder.toolchains.toolchain import probe_torch
from builder.toolchains.versions import load_versions_table
from kbuild_common.errors import ToolchainError

CUDA_132 = load_versions_table()["cuda"]["13.2"]["toolkit"]


@pytest.fixture
def store_root(tmp_path, monkeypatch):
    root = tmp_path / "toolchains"
    monkeypatch.setenv("KBUILD_TOOLCHAINS", str(root))
    return root


def kbuild(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def listing(capsys) -> dict:
    code, out, err = kbuild(capsys, "toolchain", "list", "--json")
    assert code == 0, err
    return json.loads(out)


# -- CUDA ----------------------------------------------------------------------------------------


def test_a_system_cuda_of_the_wanted_version_is_used_as_is(tmp_path):
    system = find_cuda(None)
    if system is None:
        pytest.skip("no system CUDA (/usr/local/cuda, nvcc on PATH)")
    store = ToolchainStore(tmp_path / "toolchains")
    home, how = cuda_home(store, system.version, "cuda-toolkit-requirement-never-used")
    assert (home, how) == (system.home, f"system {system.home}")
    # nothing installed: at most the cached answer of the system nvcc
    assert {p.name for p in (tmp_path / "toolchains").glob("*")} <= {".probe"}
    if system.version == (13, 0):
        assert how == "system /usr/local/cuda-13.0"


def test_cuda_13_2_wheel_install_reuse_list_prune(store_root, capsys, tmp_path):
    started = time.monotonic()
    code, out, err = kbuild(capsys, "toolchain", "install", "--no-system-cuda", "cuda-13.2")
    first = time.monotonic() - started
    assert code == 0, err
    assert f"installing {CUDA_132} into {store_root / 'cuda-13.2'}" in err
    assert out.startswith("cuda-13.2: cuda-toolkit 13.2.")
    marker, log = store_root / "cuda-13.2" / MARKER, store_root / "cuda-13.2.install.log"
    assert json.loads(marker.read_text())["requirement"] == CUDA_132
    assert not list(store_root.glob(".cuda-13.2.tmp-*"))

    home, how = cuda_home(ToolchainStore(store_root), (13, 2), CUDA_132, system=False)
    assert Path(home) == next((store_root / "cuda-13.2").glob("lib/python3*/site-packages/nvidia/cu13"))
    assert how.startswith("cuda-toolkit 13.2.") and how.endswith(f" in {store_root / 'cuda-13.2'}")
    nvcc = Path(home) / "bin" / "nvcc"
    assert "release 13.2," in subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout
    assert (Path(home) / "lib" / "libcudart.so.13").is_file() and (Path(home) / "include" / "cuda.h").is_file()
    source = tmp_path / "k.cu"
    source.write_text("__global__ void twice(float* x) { x[threadIdx.x] *= 2.f; }\n")
    compiled = subprocess.run([nvcc, "-c", "-arch=sm_90", source, "-o", tmp_path / "k.o"],
                              capture_output=True, text=True)
    assert compiled.returncode == 0, compiled.stdout + compiled.stderr

    # A second install is the marker's word: no pip (the install log is rewritten by every install).
    stamps = marker.stat().st_mtime_ns, log.stat().st_mtime_ns
    started = time.monotonic()
    code, out, err = kbuild(capsys, "toolchain", "install", "--no-system-cuda", "cuda-13.2")
    assert code == 0 and err == "" and out.startswith("cuda-13.2: cuda-toolkit 13.2.")
    assert time.monotonic() - started < min(3.0, first)
    assert (marker.stat().st_mtime_ns, log.stat().st_mtime_ns) == stamps

    entries = listing(capsys)["toolchains"]
    assert [(e["name"], e["kind"], e["version"], e["path"]) for e in entries] == [
        ("cuda-13.2", "cuda", "13.2", str(store_root / "cuda-13.2"))]
    assert entries[0]["size_bytes"] > 100_000_000 and entries[0]["detail"].startswith("nvcc 13.2.")

    code, out, err = kbuild(capsys, "toolchain", "prune", "cuda-13.2")
    assert code == 0, err
    assert "removed cuda-13.2 (" in out and "freed" in out
    assert listing(capsys)["toolchains"] == []
    assert not (store_root / "cuda-13.2").exists() and not log.exists()


def test_a_failed_install_leaves_nothing_but_its_log(tmp_path):
    store = ToolchainStore(tmp_path / "toolchains")
    with pytest.raises(ToolchainError) as e:
        cuda_home(store, (13, 2), str(tmp_path / "missing" / "cuda_toolkit-13.2.0-py3-none-any.whl"), system=False)
    message = str(e.value)
    log = store.root / "cuda-13.2.install.log"
    assert "\n" not in message and message.endswith(f"; log: {log}"), message
    assert message.startswith("pip install ") and "ERROR:" in message
    assert sorted(p.name for p in store.root.iterdir()) == [".cuda-13.2.lock", "cuda-13.2.install.log"]
    assert store.leftovers() == [log]


# -- torch ---------------------------------------------------------------------------------------


def test_the_torch_environment_is_made_once_and_reused(torch213_python):
    """torch213_python came from ToolchainStore(<session folder>).torch_python("2.13.0")."""
    root = Path(torch213_python).parents[2]
    dest = root / "torch-2.13.0"
    assert Path(torch213_python) == dest / "bin" / "python"
    marker = json.loads((dest / MARKER).read_text())
    info = probe_torch(str(torch213_python), root / ".probe")
    assert info.torch_version.split("+")[0] == "2.13.0"
    assert (marker["kind"], marker["version"], marker["torch_version"], marker["torch_cuda"]) == (
        "torch", "2.13.0", info.torch_version, info.cuda)
    assert not list(root.glob(".torch-2.13.0.tmp-*"))
    # After the rename into place, pip's scripts name the final folder.
    assert (dest / "bin" / "pip").read_text().startswith(f"#!{dest}/bin/python")

    lines: list[str] = []
    stamps = (dest / MARKER).stat().st_mtime_ns, (root / "torch-2.13.0.install.log").stat().st_mtime_ns
    store = ToolchainStore(root, log=lines.append)
    assert store.torch_python("2.13.0") == str(torch213_python)
    assert lines == []
    assert ((dest / MARKER).stat().st_mtime_ns, (root / "torch-2.13.0.install.log").stat().st_mtime_ns) == stamps
    [record] = [r for r in store.list() if r.name == "torch-2.13.0"]
    assert (record.kind, record.version, record.path) == ("torch", "2.13.0", str(dest))
    assert record.size_bytes > 100_000_000


def test_a_fitting_interpreter_is_reused_without_installing(tmp_path):
    running = probe_torch(sys.executable, tmp_path / "probe")
    store = ToolchainStore(tmp_path / "toolchains")
    release = running.torch_version.split("+")[0]
    assert store.torch_python(release, reuse=[sys.executable]) == sys.executable
    if running.cuda:
        assert store.torch_python(release, "cuda", reuse=["/nonexistent/python", sys.executable]) == sys.executable
    assert not list((tmp_path / "toolchains").glob("*torch-*"))


def test_an_index_without_a_cuda_build_is_a_one_line_flavour_error(tmp_path):
    """KBUILD_TORCH_INDEX pointing at an index that only has the CPU wheel: the CUDA install is
    refused after the probe, naming what was found, and leaves no toolchain behind."""
    wheels = sorted(Path("/opt/wheels").glob("torch-2.13.0+cpu-*.whl"))
    if not wheels:
        pytest.skip("no local torch 2.13.0 CPU wheel in /opt/wheels")
    index = tmp_path / "index" / "torch"
    index.mkdir(parents=True)
    (index / "index.html").write_text(f'<a href="{wheels[0].as_uri()}">{wheels[0].name}</a>\n')
    store = ToolchainStore(tmp_path / "toolchains", torch_index=(tmp_path / "index").as_uri())
    with pytest.raises(ToolchainError) as e:
        store.torch_python("2.13.0", "cuda")
    message = str(e.value)
    assert "\n" not in message
    assert "torch 2.13.0" in message and "not a CUDA build" in message and "2.13.0+cpu" in message
    assert str(tmp_path / "toolchains" / "torch-2.13.0" / "bin" / "python") in message
    assert store.list() == [] and not list(store.root.glob(".torch-2.13.0.tmp-*"))
