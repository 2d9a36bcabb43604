"""Plans by value: manifests from tmp_path, toolchains as hand-made records; no process, no compiler.

Also the ninja text a plan renders to, and which kernel folders a workspace names.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from builder.backends.cuda_arch import default_capabilities, parse_capability
from builder.backends.cuda_toolkit import CudaInfo
from builder.compile import ninja_file
from builder.plan.steps import Skip, VariantPlan, plan_build
from builder.project.manifest import load_manifest
from builder.project.workspace import kernel_dirs
from kbuild_common.errors import ManifestError
from plan_inputs import (
    COMPILED,
    CPU_214,
    CU130_214,
    HALF_DEFINES,
    NVCC_130_ARCHS,
    by_name,
    cuda_info,
    gencodes,
    inputs,  # noqa: F401 (fixture)
    kernel,  # noqa: F401 (fixture)
    linux_x86_64,  # noqa: F401 (fixture)
    torch_info,
    unit,
    write_kernel,
)

pytestmark = pytest.mark.usefixtures("linux_x86_64")

CORPUS = Path(__file__).resolve().parents[1] / "manifests"


# -- which variants ---------------------------------------------------------------------------


def test_variant_names_for_cpu_and_cuda(kernel):
    m = kernel()
    plan = plan_build(inputs(m))
    assert [v.name for v in plan.variants] == [CPU_214, CU130_214]
    assert plan.skipped == ()
    cpu, cuda = plan.variants
    assert (cpu.ops_name, cuda.ops_name) == ("_fused_relu_cpu_abc1234", "_fused_relu_cuda_abc1234")
    assert cuda.library == m.root / ".kbuild" / CU130_214 / "_fused_relu_cuda_abc1234.so"
    assert cpu.python_src == m.root / "torch-ext" / "fused_relu"
    assert cpu.pyext == ("py", "pyi") and cpu.compiled and cpu.archs == ()


def test_cpu_only_torch_skips_cuda_with_a_reason(kernel):
    plan = plan_build(inputs(kernel(), torch_info("2.13.0+cpu", cuda=None)))
    assert [v.name for v in plan.variants] == ["torch213-cxx11-cpu-x86_64-linux"]
    assert plan.skipped == (Skip("cuda", "torch 2.13.0+cpu is a CPU build (install a CUDA build of torch)"),)


def test_nvcc_version_must_match_torch_cuda(kernel):
    plan = plan_build(inputs(kernel(), cuda=cuda_info((12, 9))))
    assert [v.name for v in plan.variants] == [CPU_214]
    assert plan.skipped == (Skip("cuda", "nvcc is CUDA 12.9 but torch was built with CUDA 13.0 "
                                         "(the major versions must match)"),)


def test_no_nvcc_skips_cuda(kernel):
    plan = plan_build(inputs(kernel(), cuda=None))
    assert plan.skipped == (Skip("cuda", "no nvcc found (set CUDA_HOME)"),)


def test_backends_kbuild_cannot_compile_are_skipped():
    m = load_manifest(CORPUS / "good" / "kernel-builder-relu")
    plan = plan_build(inputs(m))
    assert [v.name for v in plan.variants] == [CPU_214, CU130_214]
    assert plan.skipped == tuple(
        Skip(b, f"{b} kernels cannot be compiled on this machine (kbuild compiles cpu and cuda)")
        for b in ("metal", "rocm", "xpu"))


def test_torch_and_cuda_version_bounds(kernel):
    m = kernel(torch_extra='minver = "2.10"\nmaxver = "2.13"\n')
    plan = plan_build(inputs(m))
    assert plan.variants == ()
    assert {s.reason for s in plan.skipped} == {"torch 2.14.1 is outside [torch] minver/maxver"}

    m = kernel()
    m = write_kernel(m.root, m.path.read_text().replace("[torch]", '[general.cuda]\nmaxver = "12.9"\n\n[torch]'))
    plan = plan_build(inputs(m))
    assert [v.name for v in plan.variants] == [CPU_214]
    assert plan.skipped == (Skip("cuda", "CUDA 13.0 (nvcc) is outside [general.cuda] minver/maxver"),)


def test_stable_abi_replaces_the_compiled_variants(kernel):
    # More in test_stable_abi.py.
    plan = plan_build(inputs(kernel(torch_extra='stable-abi = "2.10"\n')))
    assert [v.name for v in plan.variants] == ["torch-stable-abi210-cpu-x86_64-linux",
                                               "torch-stable-abi210-cu130-x86_64-linux"]
    assert plan.skipped == ()


def test_noarch_manifest_gives_torch_backend_variants(tmp_path):
    m = write_kernel(tmp_path / "k", (CORPUS / "good" / "torch-noarch" / "build.toml").read_text())
    # Python-only variants need no compiler, so even a CPU torch plans every backend.
    plan = plan_build(inputs(m, torch_info("2.13.0", cuda=None)))
    assert [v.name for v in plan.variants] == ["torch-cuda", "torch-rocm", "torch-xpu"]
    assert plan.skipped == ()
    cuda = plan.variants[0]
    assert not cuda.compiled and cuda.units == () and cuda.library is None
    assert cuda.ops_name == "_triton_layer_norm_cuda_abc1234"
    assert cuda.pyext == ("py", "json")
    assert cuda.python_src == m.root / "torch-ext" / "triton_layer_norm"


def test_variant_filter(kernel):
    m = kernel()
    plan = plan_build(inputs(m), only=(CU130_214,))
    assert [v.name for v in plan.variants] == [CU130_214] and plan.skipped == ()

    unknown = "torch299-cxx11-cu999-x86_64-linux"
    plan = plan_build(inputs(m), only=(unknown,))
    assert plan.variants == ()
    assert plan.skipped == (Skip(unknown, f"not buildable here (buildable: {CPU_214}, {CU130_214})"),)


def test_variant_filter_says_why_a_backend_was_skipped(kernel):
    plan = plan_build(inputs(kernel(), torch_info("2.14.1", cuda=None)), only=(CU130_214,))
    assert plan.variants == ()
    assert plan.skipped[-1] == Skip(CU130_214, (
        f"not buildable here (buildable: {CPU_214}); cuda: torch 2.14.1 is a CPU build (install a CUDA build of torch)"))


def test_plan_is_a_pure_function_of_its_inputs(kernel):
    m = kernel(cuda_extra='cuda-capabilities = ["8.0"]\n')
    first = plan_build(inputs(m))
    for path in m.root.rglob("*"):  # the plan reads no file: remove them all
        if path.is_file():
            path.unlink()
    assert plan_build(inputs(m)) == first


# -- CUDA capabilities ------------------------------------------------------------------------


@pytest.mark.parametrize(("cuda", "expected"), [
    ((13, 0), "7.5 8.0 8.6 8.7 8.9 9.0 10.0 11.0 12.0 12.1+PTX"),
    ((13, 2), "7.5 8.0 8.6 8.7 8.9 9.0 10.0 11.0 12.0 12.1+PTX"),
    ((12, 9), "7.0 7.2 7.5 8.0 8.6 8.7 8.9 9.0 10.0 10.1 12.0+PTX"),
    ((12, 8), "7.0 7.2 7.5 8.0 8.6 8.7 8.9 9.0 10.0 10.1 12.0+PTX"),
    ((12, 6), "7.0 7.2 7.5 8.0 8.6 8.7 8.9 9.0+PTX"),
])
def test_default_capabilities_per_cuda_version(cuda, expected):
    assert " ".join(map(str, default_capabilities(cuda))) == expected


def test_default_capabilities_intersected_with_nvcc(kernel):
    m = kernel()
    plan = plan_build(inputs(m, cuda=cuda_info(archs={"75", "80", "86", "90", "100", "120"})))
    cuda = by_name(plan)[CU130_214]
    assert cuda.archs == ("7.5", "8.0", "8.6", "9.0", "10.0", "12.0")
    assert gencodes(unit(cuda, "relu_cuda/relu.cu").flags) == [
        f"-gencode=arch=compute_{a},code=sm_{a}" for a in ("75", "80", "86", "90", "100", "120")]


def test_default_capabilities_with_every_arch_end_in_ptx(kernel):
    cuda = by_name(plan_build(inputs(kernel())))[CU130_214]
    assert cuda.archs == ("7.5", "8.0", "8.6", "8.7", "8.9", "9.0", "10.0", "11.0", "12.0", "12.1+PTX")
    assert gencodes(unit(cuda, "relu.cu").flags)[-2:] == [
        "-gencode=arch=compute_121,code=sm_121", "-gencode=arch=compute_121,code=compute_121"]


def test_explicit_capabilities_per_section(tmp_path):
    toml = COMPILED.format(backends='["cuda"]', torch_extra="", cuda_extra='cuda-capabilities = ["8.0"]\n')
    toml = toml.replace('[kernel.relu_cpu]\nbackend = "cpu"', '[kernel.gelu_cuda]\nbackend = "cuda"')
    toml = toml.replace('src = ["relu_cpu/relu.cpp", "relu_cpu/relu.h"]',
                        'src = ["gelu_cuda/gelu.cu"]\ncuda-capabilities = ["9.0a+PTX", "8.0"]')
    m = write_kernel(tmp_path / "k", toml)
    cuda = by_name(plan_build(inputs(m)))[CU130_214]
    assert gencodes(unit(cuda, "relu.cu").flags) == ["-gencode=arch=compute_80,code=sm_80"]
    assert gencodes(unit(cuda, "gelu.cu").flags) == [
        "-gencode=arch=compute_80,code=sm_80",
        "-gencode=arch=compute_90a,code=sm_90a", "-gencode=arch=compute_90a,code=compute_90a"]
    # What the variant records (metadata.json backend.archs) is the union, sorted.
    assert cuda.archs == ("8.0", "9.0a+PTX")


def test_capability_no_nvcc_supports_is_an_error_naming_the_section(kernel):
    m = kernel(cuda_extra='cuda-capabilities = ["10.0", "12.1"]\n')
    with pytest.raises(ManifestError) as info:
        plan_build(inputs(m, cuda=cuda_info(archs={"75", "80", "90"})))
    line = m.path.read_text().splitlines().index('cuda-capabilities = ["10.0", "12.1"]') + 1
    assert str(info.value) == (f"{m.path}:{line}: [kernel.relu_cuda] cuda-capabilities: none of 10.0, 12.1 is "
                               "supported by nvcc 13.0 (it supports 75, 80, 90)")


def test_default_capabilities_no_nvcc_supports_name_the_section_header(kernel):
    m = kernel()
    with pytest.raises(ManifestError) as info:
        plan_build(inputs(m, cuda=cuda_info(archs={"50", "52"})))
    line = m.path.read_text().splitlines().index("[kernel.relu_cuda]") + 1
    assert str(info.value).startswith(
        f"{m.path}:{line}: [kernel.relu_cuda] cuda-capabilities: none of 7.5, 8.0, 8.6, 8.7, 8.9, 9.0, 10.0, "
        "11.0, 12.0, 12.1+PTX is supported by nvcc 13.0 (it supports 50, 52)")


def test_capability_parsing():
    assert parse_capability("9.0a+PTX").gencode_flags() == [
        "-gencode=arch=compute_90a,code=sm_90a", "-gencode=arch=compute_90a,code=compute_90a"]
    assert str(parse_capability(" 10.0f ")) == "10.0f"
    for bad in ("9.5", "8.0x", "7.5+ptx", "8.0a", "90", ""):
        with pytest.raises(ValueError, match="unknown capability"):
            parse_capability(bad)


# -- compile flags ----------------------------------------------------------------------------


def test_nvcc_flags_drop_half_defines_and_add_fp8(kernel):
    m = kernel(cuda_extra='cuda-flags = ["-lineinfo", "--use_fast_math"]\n')
    flags = list(unit(by_name(plan_build(inputs(m)))[CU130_214], "relu.cu").flags)
    assert not set(HALF_DEFINES) & set(flags)
    assert flags.index("--expt-relaxed-constexpr") < flags.index("-DENABLE_FP8") < flags.index("-lineinfo")
    assert flags.index("-lineinfo") + 1 == flags.index("--use_fast_math")
    # -fno-gnu-unique for host code compiled by nvcc too.
    assert ["-Xcompiler", "-fno-gnu-unique"] == flags[flags.index("-fno-gnu-unique") - 1:flags.index("-fno-gnu-unique") + 1]


def test_no_fp8_define_before_cuda_11_8(kernel):
    m = kernel()
    plan = plan_build(inputs(m, torch_info("2.0.1", cuda="11.7"), cuda_info((11, 7))))
    cuda = plan.variants[1]
    assert cuda.name == "torch20-cxx11-cu117-x86_64-linux"
    assert "-DENABLE_FP8" not in unit(cuda, "relu.cu").flags


@pytest.mark.parametrize(("torch", "std"), [("2.11.0", "-std=c++17"), ("2.12.0", "-std=c++20"), ("2.14.1", "-std=c++20")])
def test_cxx_standard_follows_torch(kernel, torch, std):
    plan = plan_build(inputs(kernel(), torch_info(torch)))
    assert len(plan.variants) == 2
    for variant in plan.variants:
        for u in variant.units:
            assert [f for f in u.flags if f.startswith("-std=")] == [std], (variant.name, u.source)


OLD_STANDARD = """\
[general]
name = "sage"
version = 1
edition = 5
license = "Apache-2.0"
backends = ["cuda"]

[torch]
src = ["torch-ext/torch_binding.cpp"]
cxx-flags = ["-std=c++17"]

[kernel.attn]
backend = "cuda"
depends = ["torch"]
src = ["attn/attn.cu", "attn/host.cpp"]
cuda-flags = ["-O3", "-std", "c++17", "--use_fast_math"]
cxx-flags = ["-std=gnu++1z"]

[kernel.newer]
backend = "cuda"
depends = ["torch"]
src = ["newer/newer.cu"]
cuda-flags = ["-std=c++23"]

[kernel.plain]
backend = "cuda"
depends = []
src = ["plain/plain.cu"]
cuda-flags = ["-std=c++17"]
"""


def test_a_projects_older_std_is_left_out_where_torch_is_included(tmp_path):
    """Compilers take the last -std: a kernel-builder project's -std=c++17, written for torch 2.11,
    would compile torch 2.12+'s headers as C++17, which they refuse. It is dropped from the units that
    include torch (the binding's and torch-depending sections'), kept elsewhere, and the plan says
    where build.toml sets it, for the planner's one warning."""
    m = write_kernel(tmp_path / "sage", OLD_STANDARD)
    cuda = by_name(plan_build(inputs(m)))[CU130_214]

    def standards(source):
        flags = list(unit(cuda, source).flags)
        return [f for i, f in enumerate(flags) if f.startswith("-std") or (i and flags[i - 1] == "-std")]

    for source in ("torch_binding.cpp", "attn/attn.cu", "attn/host.cpp"):
        assert standards(source) == ["-std=c++20"], source
    assert "--use_fast_math" in unit(cuda, "attn/attn.cu").flags  # the rest of the section's flags stay
    assert standards("newer/newer.cu") == ["-std=c++20", "-std=c++23"]  # newer than torch asks: the project's
    assert standards("plain/plain.cu") == ["-std=c++20", "-std=c++17"]  # no torch included: the project's
    assert cuda.older_standards == ((("torch", "cxx-flags"), "-std=c++17"),
                                    (("kernel", "attn", "cuda-flags"), "-std c++17"),
                                    (("kernel", "attn", "cxx-flags"), "-std=gnu++1z"))
    assert m.where("kernel", "attn", "cuda-flags").endswith("build.toml:16: [kernel.attn] cuda-flags")
    # torch 2.11's headers are C++17: nothing is older than that, every flag stays
    old = by_name(plan_build(inputs(m, torch_info("2.11.0"))))["torch211-cxx11-cu130-x86_64-linux"]
    assert old.older_standards == () and "c++17" in unit(old, "attn/attn.cu").flags


def test_a_stable_abi_variant_keeps_the_projects_std(tmp_path):
    """The stable ABI's headers compile as C++17: its units keep what the project asks for."""
    m = write_kernel(tmp_path / "sage", OLD_STANDARD.replace('cxx-flags = ["-std=c++17"]\n',
                                                             'cxx-flags = ["-std=c++17"]\nstable-abi = "2.10"\n', 1))
    (variant,) = plan_build(inputs(m)).variants
    assert variant.name == "torch-stable-abi210-cu130-x86_64-linux" and variant.older_standards == ()
    flags = list(unit(variant, "attn/attn.cu").flags)
    assert flags[flags.index("-std"):][:3] == ["-std", "c++17", "--use_fast_math"]


def test_binding_is_compiled_once_per_backend_with_its_define(kernel):
    m = kernel()
    variants = by_name(plan_build(inputs(m)))
    for name, backend, other in ((CPU_214, "CPU", "CUDA"), (CU130_214, "CUDA", "CPU")):
        variant = variants[name]
        flags = unit(variant, "torch-ext/torch_binding.cpp").flags
        assert f"-D{backend}_KERNEL" in flags and f"-D{other}_KERNEL" not in flags
        assert f"-DTORCH_EXTENSION_NAME={variant.ops_name}" in flags
        assert f"-I{m.root / '.kbuild' / 'include'}" in flags  # registration.h
        assert "-I/env/torch/include" in flags and "-I/usr/include/python3.11" in flags
        assert "-DPy_LIMITED_API=0x03090000" in flags and "-fno-gnu-unique" in flags
    assert "-I/opt/cuda-13.0/include" in unit(variants[CU130_214], "torch_binding.cpp").flags


def test_every_unit_of_a_build_gets_its_backend_define(kernel):
    # as kernel-builder's add_compile_definitions(<BACKEND>_KERNEL): kernel sources too, not only the binding
    variants = by_name(plan_build(inputs(kernel())))
    for name, backend, other in ((CPU_214, "CPU", "CUDA"), (CU130_214, "CUDA", "CPU")):
        for u in variants[name].units:
            assert f"-D{backend}_KERNEL" in u.flags and f"-D{other}_KERNEL" not in u.flags, (name, u.source)


def test_sections_without_torch_dependency_get_no_torch_flags(kernel):
    m = kernel()
    variants = by_name(plan_build(inputs(m)))
    no_torch = unit(variants[CU130_214], "relu_cuda/relu.cu").flags
    assert not [f for f in no_torch if f.startswith("-I/env/") or f.startswith("-DTORCH_EXTENSION_NAME")]
    assert "-I/opt/cuda-13.0/include" in no_torch
    with_torch = unit(variants[CPU_214], "relu_cpu/relu.cpp").flags
    assert "-I/env/torch/include" in with_torch
    assert "-DTORCH_EXTENSION_NAME=_fused_relu_cpu_abc1234" in with_torch


def test_section_flags_and_includes(kernel):
    m = kernel(cuda_extra='include = ["relu_cuda/include"]\n', torch_extra='cxx-flags = ["-DBINDING_ONLY"]\n')
    variants = by_name(plan_build(inputs(m)))
    assert f"-I{m.root / 'relu_cuda/include'}" in unit(variants[CU130_214], "relu.cu").flags
    assert "-DBINDING_ONLY" in unit(variants[CPU_214], "torch_binding.cpp").flags
    assert "-DBINDING_ONLY" not in unit(variants[CPU_214], "relu_cpu/relu.cpp").flags


def test_project_csrc_folder_is_on_every_units_include_path(kernel):
    """kernel-builder's CMake gives every unit of the extension `<project>/csrc` (megablocks'
    binding includes "cumsum.h" from there without naming the folder); no folder, no flag."""
    m = kernel()
    variants = by_name(plan_build(inputs(m)))
    assert not [f for v in variants.values() for u in v.units for f in u.flags if f.endswith("/csrc")]
    (m.root / "csrc").mkdir()
    variants = by_name(plan_build(inputs(m)))
    for v in variants.values():
        for u in v.units:
            assert f"-I{m.root / 'csrc'}" in u.flags, (v.name, u.source)


def test_headers_in_src_are_implicit_dependencies_not_units(kernel):
    m = kernel()
    variants = by_name(plan_build(inputs(m)))
    cpu, cuda = variants[CPU_214], variants[CU130_214]
    assert [(u.source, u.tool) for u in cpu.units] == [
        (m.root / "torch-ext/torch_binding.cpp", "cxx"), (m.root / "relu_cpu/relu.cpp", "cxx")]
    assert [(u.source, u.tool) for u in cuda.units] == [
        (m.root / "torch-ext/torch_binding.cpp", "cxx"), (m.root / "relu_cuda/relu.cu", "nvcc")]
    assert unit(cpu, "torch_binding.cpp").implicit == (m.root / "torch-ext/torch_binding.h",)
    assert unit(cpu, "relu_cpu/relu.cpp").implicit == (m.root / "relu_cpu/relu.h",)
    assert unit(cuda, "relu.cu").implicit == (m.root / "relu_cuda/relu.cuh",)
    assert unit(cuda, "relu.cu").output == m.root / ".kbuild" / CU130_214 / "obj/relu_cuda/relu.cu.o"


def test_link_flags(kernel):
    variants = by_name(plan_build(inputs(kernel())))
    assert variants[CPU_214].link_flags == ("-shared", "-L/env/torch/lib", "-lc10", "-ltorch", "-ltorch_cpu",
                                            "-l:libstdc++.so.6")
    # CUDA: no local symbols, which name nvcc's intermediate files (sccache renames them: --dist)
    assert variants[CU130_214].link_flags == (
        "-shared", "-Wl,--discard-all", "-L/env/torch/lib", "-lc10", "-ltorch", "-ltorch_cpu",
        "-lc10_cuda", "-ltorch_cuda", "-L/opt/cuda-13.0/lib64", "-l:libcudart.so.13", "-l:libstdc++.so.6")


# -- the ninja file ---------------------------------------------------------------------------


def unwrap(ninja_text: str) -> list[str]:
    """ninja_syntax wraps long lines with ` $` + newline + indent; join them back."""
    return re.sub(r" \$\n +", " ", ninja_text).splitlines()


def test_ninja_render(tmp_path):
    toml = COMPILED.format(backends='["cpu", "cuda"]', cuda_extra="",
                           torch_extra='cxx-flags = ["-Wl,-rpath,$ORIGIN", "-DNAME=a b"]\n')
    m = write_kernel(tmp_path / "my kernel", toml)
    plan = plan_build(inputs(m))
    noarch = VariantPlan(plan.variants[0].variant, "_x_cpu_abc1234", m.root, ("py",))  # not compiled: no edges
    graph = ninja_file.render([*plan.variants, noarch], cxx="c++",
                              compilers={"/opt/cuda-13.0/bin/nvcc": "/opt/cuda-13.0/bin/nvcc"})
    text = graph.text
    lines = unwrap(text)
    for rule in ("cxx", "nvcc", "link"):
        assert f"rule {rule}" in lines
    builds = [line for line in lines if line.startswith("build ")]
    units = [u for v in plan.variants for u in v.units]
    assert len(builds) == len(units) + 2 * len(plan.variants)  # + one link and one phony each
    esc = str(m.root).replace(" ", "$ ")
    for u in units:
        edge = f"build {str(u.output).replace(' ', '$ ')}: {u.tool} {str(u.source).replace(' ', '$ ')}"
        edge += "".join(f" | {str(h).replace(' ', '$ ')}" for h in u.implicit)
        assert edge in builds, edge
    for v in plan.variants:
        assert f"build {v.ops_name}-{v.name}: phony {str(v.library).replace(' ', '$ ')}" in builds
    assert f"build {esc}/.kbuild/{CPU_214}/_fused_relu_cpu_abc1234.so: link" in " ".join(builds)
    # `$` in a flag reaches the command line literally: doubled for ninja, quoted for the shell.
    assert "'-Wl,-rpath,$$ORIGIN'" in text and not re.search(r"(?<!\$)\$ORIGIN", text)
    assert "'-DNAME=a b'" in " ".join(lines)
    # every step's status line is attributed to its variant by the graph itself (no noarch steps)
    assert graph.steps == {v.name: len(v.units) + 1 for v in plan.variants}
    for v in plan.variants:
        assert graph.owners[f"LINK {v.library}"] == (v.name,)
        for u in v.units:
            assert graph.owners[f"{'NVCC' if u.tool == 'nvcc' else 'CXX'} {u.source} ({v.name})"] == (v.name,)
    assert "  description = $desc" in lines and f"  desc = LINK {plan.variants[0].library}" in lines


def test_nvcc_units_are_seeded_by_their_path_when_nvcc_takes_a_seed(tmp_path):
    m = write_kernel(tmp_path / "k", COMPILED.format(backends='["cpu", "cuda"]', cuda_extra="", torch_extra=""))
    plan = plan_build(inputs(m))
    cu = [u for v in plan.variants for u in v.units if u.tool == "nvcc"]
    assert cu
    nvcc = cu[0].compiler
    plain = ninja_file.render(list(plan.variants), cxx="c++", compilers={nvcc: nvcc}, root=m.root).text
    seeded = ninja_file.render(list(plan.variants), cxx="c++", compilers={nvcc: nvcc}, root=m.root,
                              seeded=frozenset({nvcc})).text
    assert "-frandom-seed" not in plain
    for u in cu:  # the same relative path nvcc is told to name the source by: no folder in it
        rel = f"../{u.source.relative_to(m.root).as_posix()}"
        assert f"--orig_src_path_name={rel} -frandom-seed={rel}" in seeded.replace("\n", " "), rel
    assert str(tmp_path) not in "".join(line for line in seeded.splitlines() if "frandom-seed" in line
                                        for line in [line.split("-frandom-seed=")[1]])


def test_ninja_render_without_nvcc_has_no_nvcc_rule(kernel):
    plan = plan_build(inputs(kernel(), torch_info(cuda=None)))
    text = ninja_file.render(list(plan.variants), cxx="/usr/bin/g++", compilers=None).text
    assert "rule nvcc" not in text and "cxx = /usr/bin/g++" in text
    assert [line for line in unwrap(text) if line.startswith("build ")][-1] == (
        f"build {plan.variants[0].ops_name}-{plan.variants[0].name}: phony {plan.variants[0].library}")


# -- workspaces -------------------------------------------------------------------------------


def workspace(root: Path, body: str, kernels=("a", "b", "c")) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "build.toml").write_text(body)
    for name in kernels:
        (root / "kernels" / name).mkdir(parents=True)
        (root / "kernels" / name / "build.toml").write_text("")
    (root / "kernels" / "notes").mkdir()  # no build.toml: not a member
    return root


def test_a_kernel_folder_is_its_own_list(tmp_path):
    (tmp_path / "build.toml").write_text('[general]\nname = "x"\n')
    assert kernel_dirs(tmp_path) == [tmp_path]


def test_workspace_members_glob(tmp_path):
    ws = workspace(tmp_path, '[workspace]\nmembers = ["kernels/*"]\n')
    assert kernel_dirs(ws) == [ws / "kernels" / n for n in ("a", "b", "c")]


def test_workspace_exclude(tmp_path):
    ws = workspace(tmp_path, '[workspace]\nmembers = ["kernels/*", "kernels/a"]\nexclude = ["kernels/b"]\n')
    assert kernel_dirs(ws) == [ws / "kernels" / "a", ws / "kernels" / "c"]


@pytest.mark.parametrize(("body", "line", "message"), [
    ('members = ["kernels/*", "ops/*"]', 2, '[workspace] members: "ops/*" matches no kernel folder'),
    ('members = ["kernels/*"]\nexclude = ["kernels/*"]', 2, "[workspace] members: no kernels listed"),
    ('members = ["kernels/*"]\nmatrix = []', 3, "[workspace.matrix]: expected a table, got []"),
    ('members = ["kernels/*"]\nmatrixx = 1', 3, "[workspace] matrixx: unknown key (expected one of: members, exclude, matrix, cache, dist)"),
    ('members = "kernels/*"', 2, "[workspace] members: expected a list of glob patterns relative to"),
    ('members = ["/abs/kernels/*"]', 2, "[workspace] members: expected a list of glob patterns relative to"),
])
def test_workspace_errors(tmp_path, body, line, message):
    ws = workspace(tmp_path, f"[workspace]\n{body}\n")
    with pytest.raises(ManifestError) as info:
        kernel_dirs(ws)
    assert str(info.value).startswith(f"{ws / 'build.toml'}:{line}: {message}")


def test_workspace_errors_are_all_reported_in_file_order(tmp_path):
    ws = workspace(tmp_path, '[workspace]\nmembers = ["kernels/*", "ops/*"]\nmatrixx = 1\n\n[workspace.cache]\n'
                             'remote = "redis://x"\n[workspace.dist]\nscheduler = "http://s"\n[workspace.x]\n')
    with pytest.raises(ManifestError) as info:
        kernel_dirs(ws)
    where = ws / "build.toml"
    assert [str(e) for e in info.value.errors] == [
        f'{where}:2: [workspace] members: "ops/*" matches no kernel folder',
        f"{where}:3: [workspace] matrixx: unknown key (expected one of: members, exclude, matrix, cache, dist)",
        f"{where}:9: [workspace] x: unknown key (expected one of: members, exclude, matrix, cache, dist)"]


def test_workspace_check_reports_a_members_error(tmp_path, monkeypatch, capsys):
    from builder.commands.main import main

    ws = workspace(tmp_path, '[workspace]\nmembers = ["kernels/*"]\n', kernels=("a",))
    good = (CORPUS / "good" / "torch-noarch" / "build.toml").read_text()
    (ws / "kernels" / "a" / "build.toml").write_text(good.replace("backends = [", 'backends = ["opencl", '))
    monkeypatch.chdir(ws)
    assert main(["check", "."]) == ManifestError.exit_code
    assert capsys.readouterr().err.splitlines() == [
        "kbuild: error: kernels/a/build.toml:6: [general] backends: unknown backend \"opencl\" "
        "(known: cpu, cuda, metal, rocm, xpu, neuron, tpu, cann)"]


def test_cuda_sections_without_device_code_add_no_archs(tmp_path, linux_x86_64):
    """metadata's backend.archs lists what nvcc compiled: a host-only CUDA section compiles none."""
    toml = COMPILED.format(backends='["cpu", "cuda"]', torch_extra="", cuda_extra="").replace(
        'src = ["relu_cuda/relu.cu", "relu_cuda/relu.cuh"]', 'src = ["relu_cuda/host.cpp"]')
    plan = plan_build(inputs(write_kernel(tmp_path / "host-only", toml)))
    cuda = next(v for v in plan.variants if v.variant.backend == "cuda")
    assert cuda.archs == () and all(u.tool == "cxx" for u in cuda.units)


def test_newer_nvcc_minor_builds_its_own_cuda_variant(kernel):
    # torch built with CUDA 13.0 + nvcc 13.2 -> the cu132 variant, with 13.2's headers only.
    cuda = CudaInfo(home="/tc/nvidia/cu13", nvcc="/tc/nvidia/cu13/bin/nvcc", version=(13, 2),
                    archs=frozenset(NVCC_130_ARCHS), lib="/tc/nvidia/cu13/lib")
    variants = by_name(plan_build(inputs(kernel(), cuda=cuda)))
    v = variants["torch214-cxx11-cu132-x86_64-linux"]
    flags = [f for u in v.units for f in u.flags]
    assert "-I/tc/nvidia/cu13/include" in flags
    assert "-I/env/nvidia/cu13/include" not in flags  # torch's CUDA 13.0 headers: never mixed in
    assert {u.compiler for u in v.units if u.tool == "nvcc"} == {"/tc/nvidia/cu13/bin/nvcc"}
    assert v.link_flags[-3:] == ("-L/tc/nvidia/cu13/lib", "-l:libcudart.so.13", "-l:libstdc++.so.6")


def test_ninja_render_runs_identical_compiles_once(kernel):
    # A .cu without torch headers, for torch 2.13 and 2.14 with one nvcc: one edge, linked twice.
    plans = [v for t in ("2.13.0", "2.14.1") for v in plan_build(inputs(kernel(), torch_info(t))).variants]
    cuda = [v for v in plans if v.variant.backend == "cuda"]
    assert len(cuda) == 2
    graph = ninja_file.render(plans, cxx="c++", compilers={"/opt/cuda-13.0/bin/nvcc": "/w/bin/cuda-13.0/nvcc"})
    text = unwrap(graph.text)
    compiles = [line for line in text if line.startswith("build ") and ": nvcc " in line]
    assert len(compiles) == 1 and str(cuda[0].units[-1].output) in compiles[0]
    links = [line for line in text if line.startswith("build ") and ": link " in line and "cuda" in line]
    assert len(links) == 2 and all(str(cuda[0].units[-1].output) in line for line in links)
    assert "  nvcc = /w/bin/cuda-13.0/nvcc" in text
    # the one edge is shown under the first variant and belongs to both variants' logs
    shared = f"NVCC {cuda[0].units[-1].source} ({cuda[0].name})"
    assert graph.owners[shared] == (cuda[0].name, cuda[1].name)
    assert sum(graph.steps.values()) == len([line for line in text if line.startswith("build ") and ": phony " not in line])


def test_section_cuda_minver_leaves_the_section_out_of_older_cuda_variants(kernel):
    m = kernel(cuda_extra='cuda-minver = "13.2"\n')
    old = by_name(plan_build(inputs(m)))["torch214-cxx11-cu130-x86_64-linux"]
    assert not any(u.source.name == "relu.cu" for u in old.units) and old.archs == ()
    cuda = CudaInfo(home="/tc/cu13", nvcc="/tc/cu13/bin/nvcc", version=(13, 2), archs=frozenset(NVCC_130_ARCHS))
    new = by_name(plan_build(inputs(m, cuda=cuda)))["torch214-cxx11-cu132-x86_64-linux"]
    assert any(u.source.name == "relu.cu" for u in new.units)


def test_std_flags_read_in_each_spelling():
    from builder.plan.cxx_standard import drop_older_standards, year

    assert (year("c++17"), year("gnu++1z"), year("c++2a"), year("c++26"), year("c++2x")) == (2017, 2017, 2020, 2026, None)
    flags = ["-O3", "--std=c++14", "-std", "c++17", "-std=c++2x", "-std=gnu++20", "-std"]  # the last has no value
    assert drop_older_standards(flags, "-std=c++20") == (["-O3", "-std=c++2x", "-std=gnu++20", "-std"],
                                                         ["--std=c++14", "-std c++17"])
