"""`nvcc --version` has one reader (builder/toolchains/toolchain.py: nvcc_version): the probe that
finds a CUDA for a build and the toolchain store that checks the nvcc it installed agree on it.
Runs the real nvcc."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from builder.backends import BACKENDS
from builder.backends.cuda_toolkit import find_cuda, nvcc_version
from builder.backends.cuda_wheels import installed_nvcc
from builder.toolchains.provision import ToolchainStore
from kbuild_common.errors import ToolchainError


@pytest.fixture
def system():
    found = find_cuda(None)
    if found is None:
        pytest.skip("no system CUDA (/usr/local/cuda, nvcc on PATH)")
    return found


def test_the_probe_and_the_store_read_nvcc_alike(system):
    said = nvcc_version(Path(system.nvcc))
    out = subprocess.run([system.nvcc, "--version"], capture_output=True, text=True, check=True).stdout
    assert f"release {said.cuda[0]}.{said.cuda[1]}, V{said.build}" in out
    assert said.cuda == system.version  # what find_cuda's probe recorded
    assert installed_nvcc(Path(system.home), system.version) == said.build  # what the store records


def test_the_store_refuses_an_nvcc_of_another_release(system):
    major, minor = system.version
    with pytest.raises(ToolchainError, match=rf"bin/nvcc is CUDA {major}\.{minor}, expected {major}\.{minor + 1}$"):
        installed_nvcc(Path(system.home), (major, minor + 1))


def test_a_program_that_is_no_nvcc_is_one_clear_error(tmp_path):
    with pytest.raises(ToolchainError, match=r"cannot read the CUDA version from .*/true --version"):
        nvcc_version(Path("/bin/true"))


def test_the_build_reads_the_probes_the_toolchain_commands_wrote(system, tmp_path):
    """`kbuild toolchain install` probes through BuilderSettings.probe_dir, a build through
    BuildOptions.probe_dir: one folder, so a build right after an install does not probe again."""
    from builder.config.environment import BuilderSettings
    from builder.config.options import BuildOptions

    settings, options = BuilderSettings(cache_dir=tmp_path / "cache"), BuildOptions(tmp_path, cache_dir=tmp_path / "cache")
    assert find_cuda(system.home, settings.probe_dir) == find_cuda(system.home, options.probe_dir)
    assert [p.name.startswith("nvcc-") for p in options.probe_dir.iterdir()] == [True]


def test_a_record_whose_nvcc_is_no_release_is_one_clear_error(tmp_path):
    """A variant's record (read from a hub, so not kbuild's to trust) whose nvcc version is no CUDA
    release: rebuilding it is one ToolchainError naming what it says (it was an AttributeError on
    None, with or without a system nvcc)."""
    store = ToolchainStore(tmp_path / "toolchains")
    for wanted in (None, 13, "cuda"):
        with pytest.raises(ToolchainError, match=r"the variant's record names nvcc .*: not a CUDA release"):
            BACKENDS["cuda"].rebuild_env({"nvcc": {"version": wanted, "from": "system"}}, {}, store, None, tmp_path)
    assert not store.root.exists()
