"""CUDA's toolkit from PyPI: NVIDIA's cuda-toolkit wheels of one CUDA release as the toolchain store's
cuda-X.Y (a venv whose site-packages/nvidia/cuNN is CUDA_HOME), unless the system CUDA is that release.

The store (builder/toolchains/provision.py: `pip_toolchain`) holds the lock, builds the venv, runs
pip and writes the marker last; `CudaWheels` says where nvcc lands, checks it and what the marker
keeps. Toolchains installed before this module existed have the same marker: kind "cuda", `home`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from builder.backends.base import Version
from builder.backends.cuda_toolkit import find_cuda, nvcc_version
from kbuild_common.errors import KbuildError, ToolchainError


@dataclass(frozen=True)
class CudaWheels:
    """`pip install requirement` (NVIDIA's cuda-toolkit wheels) of CUDA `version`, as the store keeps it."""

    version: Version
    requirement: str
    kind: ClassVar[str] = "cuda"  # the marker's kind: the CUDA backend's versions.toml table

    @property
    def name(self) -> str:
        return f"cuda-{self.version[0]}.{self.version[1]}"

    def ready(self, marker: dict) -> bool:
        return bool(marker.get("home"))

    def found(self, venv: Path) -> dict:
        """Where pip put nvcc in the venv, before the venv moves into place."""
        major = self.version[0]
        homes = sorted(venv.glob(f"lib/python3*/site-packages/nvidia/cu{major}"))
        if not homes or not (homes[0] / "bin" / "nvcc").is_file():
            raise ToolchainError(f"{self.requirement} installed no nvidia/cu{major}/bin/nvcc into {venv}",
                                 hint="check [cuda] toolkit in builder/versions.toml")
        return {"home": str(homes[0].relative_to(venv))}

    def marker(self, dest: Path, found: dict) -> dict:
        """The marker's fields once in place at `dest`: nvcc run there, and checked to be `version`."""
        return {"version": f"{self.version[0]}.{self.version[1]}", "requirement": self.requirement,
                "home": found["home"], "nvcc": installed_nvcc(dest / found["home"], self.version)}


def cuda_home(store, version: Version, requirement: str, *, system: bool = True) -> tuple[str, str]:
    """(CUDA_HOME, how): the system CUDA when its nvcc is exactly `version` (unless `system` is
    False), else the store's cuda-X.Y made by `pip install requirement`, installed if missing."""
    if system:
        try:
            found = find_cuda(None, store.probe_dir)
        except KbuildError:
            found = None
        if found and found.version == version:
            return found.home, f"system {found.home}"
    wheels = CudaWheels(version, requirement)
    dest, marker = store.pip_toolchain(wheels)
    home = dest / marker["home"]
    if not (home / "bin" / "nvcc").is_file():  # checked by running it when installed
        raise ToolchainError(f"{wheels.name}: {home / 'bin' / 'nvcc'} is missing",
                             hint=f"kbuild toolchain prune {wheels.name}, then install it again")
    return str(home), f"cuda-toolkit {marker.get('nvcc', '')} in {dest}"


def installed_nvcc(home: Path, version: Version) -> str:
    """nvcc's full version (13.2.86), checked to be exactly `version`."""
    nvcc = home / "bin" / "nvcc"
    found = nvcc_version(nvcc)
    if found.build is None:
        raise ToolchainError(f"cannot read the CUDA version from {nvcc} --version")
    if found.cuda != version:
        raise ToolchainError(f"{nvcc} is CUDA {found.cuda[0]}.{found.cuda[1]}, expected {version[0]}.{version[1]}")
    return found.build


def detail(marker: dict) -> str:
    """How `kbuild toolchain list` describes a store's cuda-X.Y."""
    return f"nvcc {marker.get('nvcc')} ({marker.get('requirement')})"
