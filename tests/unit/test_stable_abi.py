"""Torch stable-ABI builds (`[torch] stable-abi`): plans by value, then the fixture kernel
tests/fixtures/relu-stable built with this venv's torch and loaded by this torch and by 2.13.0.

The integration tests are slow: they compile, and one installs torch 2.13.0 into a new venv.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from builder.plan.steps import Skip, plan_build, stable_defines
from builder.project.manifest import load_manifest
from plan_inputs import COMPILED, by_name, inputs, linux_x86_64, torch_info, unit, write_kernel  # noqa: F401

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "relu-stable"
STABLE_CPU = "torch-stable-abi210-cpu-x86_64-linux"
STABLE_CU130 = "torch-stable-abi210-cu130-x86_64-linux"
STABLE_210 = ("-DTORCH_STABLE_ONLY", "-DTORCH_TARGET_VERSION=0x020a000000000000")
pinned_host = pytest.mark.usefixtures("linux_x86_64")


def stable_kernel(tmp_path: Path, stable: str, backends: str = '["cpu", "cuda"]'):
    return write_kernel(tmp_path / "fused-relu", COMPILED.format(
        backends=backends, torch_extra=f"stable-abi = {stable}\n", cuda_extra=""))


# -- plans (pure) ---------------------------------------------------------------------------


@pytest.mark.parametrize(("abi", "define"), [
    ((2, 10), "-DTORCH_TARGET_VERSION=0x020a000000000000"),
    ((2, 13), "-DTORCH_TARGET_VERSION=0x020d000000000000"),  # torch 2.13's own value
    ((3, 0), "-DTORCH_TARGET_VERSION=0x0300000000000000"),
])
def test_target_version_encoding(abi, define):
    # torch/headeronly/version.h: one byte each for major, minor, patch (then the ABI tag).
    assert stable_defines(abi) == ("-DTORCH_STABLE_ONLY", define)


@pinned_host
def test_stable_abi_for_every_backend_names_and_flags(tmp_path):
    m = stable_kernel(tmp_path, '"2.10"')
    plan = plan_build(inputs(m))
    assert [v.name for v in plan.variants] == [STABLE_CPU, STABLE_CU130] and plan.skipped == ()
    cpu, cuda = plan.variants
    assert (cpu.ops_name, cuda.ops_name) == ("_fused_relu_cpu_abc1234", "_fused_relu_cuda_abc1234")
    assert cpu.library == m.root / ".kbuild" / STABLE_CPU / "_fused_relu_cpu_abc1234.so"
    assert cuda.variant.torch == (2, 10) and cuda.variant.compute_version == (13, 0)
    for variant, torch_units in ((cpu, ("torch_binding.cpp", "relu_cpu/relu.cpp")), (cuda, ("torch_binding.cpp",))):
        for source in torch_units:
            flags = unit(variant, source).flags
            assert all(f in flags for f in STABLE_210), (variant.name, source, flags)
            assert f"-DTORCH_EXTENSION_NAME={variant.ops_name}" in flags
            assert not any(f.startswith("-D_GLIBCXX_USE_CXX11_ABI") for f in flags)
    # A CUDA section that does not depend on torch compiles exactly as before: no torch at all.
    assert not any("TORCH" in f for f in unit(cuda, "relu_cuda/relu.cu").flags)
    assert cpu.link_flags == ("-shared", "-L/env/torch/lib", "-ltorch", "-ltorch_cpu", "-l:libstdc++.so.6")
    assert cuda.link_flags == ("-shared", "-Wl,--discard-all", "-L/env/torch/lib", "-ltorch", "-ltorch_cpu", "-ltorch_cuda",
                               "-L/opt/cuda-13.0/lib64", "-l:libcudart.so.13", "-l:libstdc++.so.6")


@pinned_host
def test_stable_abi_table_applies_per_backend(tmp_path):
    m = stable_kernel(tmp_path, '{ cuda = "2.12" }')
    plan = plan_build(inputs(m))
    assert [v.name for v in plan.variants] == ["torch214-cxx11-cpu-x86_64-linux",
                                               "torch-stable-abi212-cu130-x86_64-linux"]
    cpu, cuda = plan.variants
    assert "-D_GLIBCXX_USE_CXX11_ABI=1" in unit(cpu, "torch_binding.cpp").flags
    assert "-DTORCH_STABLE_ONLY" not in unit(cpu, "torch_binding.cpp").flags
    assert "-DTORCH_TARGET_VERSION=0x020c000000000000" in unit(cuda, "torch_binding.cpp").flags
    assert "-lc10" in cpu.link_flags and "-lc10_cuda" not in cuda.link_flags

    # A backend entry wins over "*".
    m = stable_kernel(tmp_path, '{ "*" = "2.10", cuda = "2.11" }')
    assert [v.name for v in plan_build(inputs(m)).variants] == [STABLE_CPU, "torch-stable-abi211-cu130-x86_64-linux"]


@pinned_host
def test_stable_abi_newer_than_the_building_torch_is_skipped(tmp_path):
    m = stable_kernel(tmp_path, '"2.14"')
    plan = plan_build(inputs(m, torch_info("2.13.0")))
    assert plan.variants == ()
    assert plan.skipped == tuple(Skip(b, "[torch] stable-abi 2.14 is newer than torch 2.13.0 building it "
                                         "(build with torch >= 2.14)") for b in ("cpu", "cuda"))
    # Equal is fine: the ABI of the torch that builds it.
    plan = plan_build(inputs(m, torch_info("2.14.1")))
    assert [v.name for v in plan.variants] == ["torch-stable-abi214-cpu-x86_64-linux",
                                               "torch-stable-abi214-cu130-x86_64-linux"]


@pinned_host
def test_fixture_plans_stable_variants():
    plan = plan_build(inputs(load_manifest(FIXTURE)))
    assert [v.name for v in plan.variants] == [STABLE_CPU, STABLE_CU130]
    cuda = by_name(plan)[STABLE_CU130]
    assert cuda.archs == ("8.0", "9.0")
    assert all(f in unit(cuda, "relu_cuda/relu_cuda.cpp").flags for f in STABLE_210)
