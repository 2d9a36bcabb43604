"""Plans by value, for the tests that plan without a compiler: a kernel folder written from a
build.toml (every source it names an empty file), hand-made torch and nvcc records, the plan's
inputs, and lookups into a plan's variants and compile units."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from builder.backends.cuda_toolkit import CudaInfo
from builder.plan.steps import CompileUnit, PlanInputs, VariantPlan
from builder.project.manifest import Manifest, load_manifest
from builder.toolchains.toolchain import TorchInfo
from kbuild import variants

SOURCE_ID = "abc1234"
CPU_214 = "torch214-cxx11-cpu-x86_64-linux"
CU130_214 = "torch214-cxx11-cu130-x86_64-linux"
HALF_DEFINES = ("-D__CUDA_NO_HALF_OPERATORS__", "-D__CUDA_NO_HALF_CONVERSIONS__",
                "-D__CUDA_NO_BFLOAT16_CONVERSIONS__", "-D__CUDA_NO_HALF2_OPERATORS__")
# torch.utils.cpp_extension.COMMON_NVCC_FLAGS as torch 2.14 spells it.
TORCH_NVCC_FLAGS = (*HALF_DEFINES, "--expt-relaxed-constexpr")
# What `nvcc --list-gpu-arch` of CUDA 13.0 lists.
NVCC_130_ARCHS = frozenset("75 80 86 87 88 89 90 100 103 110 120 121".split())


@pytest.fixture
def linux_x86_64(monkeypatch):
    """Variant names carry the host's cpu and os: pin them so names are exact everywhere."""
    monkeypatch.setattr(variants, "host_cpu", lambda: "x86_64")  # Platform.host() asks these
    monkeypatch.setattr(variants, "host_os", lambda: "linux")


def torch_info(version: str = "2.14.1", cuda: str | None = "13.0", cmake_nvcc_flags=()) -> TorchInfo:
    return TorchInfo(
        python="/env/bin/python", torch_version=version, cuda=cuda, cxx11=True,
        include_paths=("/env/torch/include", "/env/torch/include/torch/csrc/api/include"),
        library_paths=("/env/torch/lib",), python_include="/usr/include/python3.11",
        facts={"cuda": {"common_nvcc_flags": TORCH_NVCC_FLAGS, "cmake_nvcc_flags": tuple(cmake_nvcc_flags),
                        "nvidia_include": ("/env/nvidia/cu13/include",) if cuda else ()}},
    )


def cuda_info(version: tuple[int, int] = (13, 0), archs=NVCC_130_ARCHS) -> CudaInfo:
    home = f"/opt/cuda-{version[0]}.{version[1]}"
    return CudaInfo(home=home, nvcc=f"{home}/bin/nvcc", version=version, archs=frozenset(archs))


def inputs(m: Manifest, torch: TorchInfo | None = None, cuda: CudaInfo | None | str = "default") -> PlanInputs:
    torch = torch or torch_info()
    if cuda == "default":
        cuda = cuda_info() if torch.cuda else None
    work = m.root / ".kbuild"
    return PlanInputs(m, torch, {"cuda": cuda} if cuda else {}, SOURCE_ID, work, work / "include")


COMPILED = """\
[general]
name = "fused-relu"
version = 1
edition = 5
license = "Apache-2.0"
backends = {backends}

[torch]
src = ["torch-ext/torch_binding.cpp", "torch-ext/torch_binding.h"]
{torch_extra}
[kernel.relu_cuda]
backend = "cuda"
depends = []
src = ["relu_cuda/relu.cu", "relu_cuda/relu.cuh"]
{cuda_extra}
[kernel.relu_cpu]
backend = "cpu"
depends = ["torch"]
src = ["relu_cpu/relu.cpp", "relu_cpu/relu.h"]
"""


def write_kernel(root: Path, toml: str) -> Manifest:
    """A kernel folder with `toml` as its build.toml and an empty file for every source it names."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "build.toml").write_text(toml)
    for src in re.findall(r'"([\w./-]+\.(?:cpp|h|cu|cuh|mm|metal))"', toml):
        (root / src).parent.mkdir(parents=True, exist_ok=True)
        (root / src).write_text("// never compiled\n")
    return load_manifest(root)


@pytest.fixture
def kernel(tmp_path):
    """kernel(cuda_extra=…, torch_extra=…, backends=…) -> the fused-relu manifest."""

    def make(cuda_extra: str = "", torch_extra: str = "", backends: str = '["cpu", "cuda"]') -> Manifest:
        return write_kernel(tmp_path / "fused-relu", COMPILED.format(
            backends=backends, torch_extra=textwrap.dedent(torch_extra), cuda_extra=textwrap.dedent(cuda_extra)))

    return make


def by_name(plan) -> dict[str, VariantPlan]:
    return {v.name: v for v in plan.variants}


def unit(variant: VariantPlan, source: str) -> CompileUnit:
    (found,) = [u for u in variant.units if u.source.as_posix().endswith(source)]
    return found


def gencodes(flags) -> list[str]:
    return [f for f in flags if f.startswith("-gencode=")]
