"""What real kernel-builder projects need, by value: dependency names, CUTLASS releases, a
--cuda-archs restriction, torch's CMake nvcc flags, nvcc threads and one-line missing-header
errors. Plans use hand-made toolchains (no process, no compiler); the real corpus is read where it
exists (tests/helpers/corpus.py)."""

from __future__ import annotations

import importlib.util
import json
import textwrap
import warnings
from dataclasses import replace
from pathlib import Path

import pytest

from builder.backends.cuda_arch import parse_arch_list, parse_capability
from builder.backends.cuda_toolkit import cmake_nvcc_flags
from builder.compile.diagnose import failure_reason
from builder.compile.graph import nvcc_threads
from builder.config.cascade import Setting
from builder.plan.steps import plan_build
from builder.project.dependencies import check_dependency, cutlass_for, parse_dependency, pick_cutlass, provider_of
from builder.project.manifest import load_manifest
from builder.publish.publish import LocalVariant, PublishError, check_publishable
from builder.toolchains.spec import parse_spec
from builder.toolchains.versions import load_versions_table
from corpus import ABSENT, CORPUS, present
from kbuild_common.errors import ManifestError, ToolchainError
from plan_inputs import CU130_214, by_name, gencodes, inputs, torch_info, unit, write_kernel

FLAG = "--cuda-archs"

pytestmark = pytest.mark.usefixtures("linux_x86_64")

RELEASES = ["3.3.0.0", "3.5.0.0", "3.5.1.0", "3.6.0.0", "3.8.0.0", "4.2.0.0"]


@pytest.fixture
def linux_x86_64(monkeypatch):
    from kbuild import variants

    monkeypatch.setattr(variants, "host_cpu", lambda: "x86_64")  # Platform.host() asks these
    monkeypatch.setattr(variants, "host_os", lambda: "linux")


# -- dependency names -------------------------------------------------------------------------


def test_dependency_names_kernel_builder_knows():
    assert parse_dependency("cutlass_4_0").version == (4, 0) and parse_dependency("cutlass_4_0").headers
    assert parse_dependency("cutlass_2_10").version == (2, 10)
    for name in ("torch", "sycl_tla", "cutlass_sycl", "metal-cpp", "tvm-ffi", "einops", "nvidia-cutlass-dsl"):
        assert parse_dependency(name) is not None, name
    assert parse_dependency("cutlas_4_0") is None and parse_dependency("cutlass-4.0") is None
    assert check_dependency("cutlass_3_9", "cuda") is None
    assert check_dependency("einops", "cpu") is None  # a Python package: nothing to compile against
    assert "xpu" in check_dependency("sycl_tla", "cuda")  # known, but of another backend's builds
    assert "tvm-ffi" in check_dependency("tvm-ffi", "cuda")
    assert check_dependency("flashinfer", "cuda").startswith('unknown dependency "flashinfer" (known: torch, cutlass_X_Y')


def test_cutlass_release_exact_else_nearest_of_the_same_major():
    assert pick_cutlass((3, 6), RELEASES).release == "3.6.0.0" and pick_cutlass((3, 6), RELEASES).exact
    assert pick_cutlass((3, 5), RELEASES).release == "3.5.1.0"  # the newest patch of that minor
    four = pick_cutlass((4, 0), RELEASES)
    assert four.release == "4.2.0.0" and four.name == "cutlass-4.2" and not four.exact
    assert four.warning("cutlass_4_0") == ("cutlass_4_0: nvidia-cutlass 4.0 is not published on PyPI; "
                                          "using 4.2.0.0, the nearest 4.x release")
    assert pick_cutlass((3, 9), RELEASES).release == "3.8.0.0"
    assert pick_cutlass((3, 7), RELEASES).release == "3.8.0.0"  # a tie goes to the newer minor
    assert pick_cutlass((4, 5), RELEASES).release == "4.2.0.0"
    assert pick_cutlass((2, 10), RELEASES) is None
    assert pick_cutlass((3, 6), RELEASES).warning("cutlass_3_6") is None


def test_cutlass_toolchain_specs():
    table = load_versions_table()
    assert parse_spec("cutlass-4.2", table).requirement == "nvidia-cutlass==4.2.0.0"
    assert parse_spec("cutlass-3.5.0.0", table).version == "3.5.0.0"
    assert cutlass_for("cutlass-4.0", table["cutlass"]["releases"]) is None  # install names a release
    with pytest.raises(Exception, match=r"unknown toolchain 'cutlass-4.0'.*cutlass-4.2"):
        parse_spec("cutlass-4.0", table)


def test_include_providers():
    assert provider_of("cutlass/gemm/device/gemm.h") == "cutlass_X_Y"
    assert provider_of("cute/tensor.hpp") == "cutlass_X_Y"
    assert provider_of("ATen/cuda/CUDAContext.h") == "torch"
    assert provider_of("flashinfer/mma.cuh") is None


# -- manifests --------------------------------------------------------------------------------

MANIFEST = """\
[general]
name = "gemm"
version = 1
backends = ["cuda", "xpu"]
license = "MIT"

[torch]
src = ["torch-ext/torch_binding.cpp"]

[kernel.gemm]
backend = "cuda"
depends = {cuda_depends}
{cuda_extra}src = ["gemm/gemm.cu", "gemm/util.cu"]

[kernel.plain]
backend = "cuda"
depends = ["torch"]
src = ["plain/plain.cu"]

[kernel.gemm_xpu]
backend = "xpu"
depends = {xpu_depends}
src = ["xpu/gemm.cpp"]
"""


def gemm(tmp_path, cuda_depends='["torch", "cutlass_4_0"]', xpu_depends='["torch", "sycl_tla"]', cuda_extra="",
         flake: bool = False):
    root = tmp_path / "gemm"
    if flake:
        root.mkdir(parents=True, exist_ok=True)
        (root / "flake.nix").write_text('{ inputs.kernel-builder.url = "github:huggingface/kernels"; }\n')
    text = MANIFEST.format(cuda_depends=cuda_depends, xpu_depends=xpu_depends, cuda_extra=cuda_extra)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        m = write_kernel(root, text)
    return m, [str(w.message) for w in caught]


def test_dependencies_of_backends_kbuild_does_not_build_are_never_errors(tmp_path):
    m, _ = gemm(tmp_path, xpu_depends='["torch", "sycl_tla", "some_future_sycl_lib"]')
    assert m.kernels[2].depends == ("torch", "sycl_tla", "some_future_sycl_lib")


def test_unknown_dependency_in_a_built_section_names_it(tmp_path):
    with pytest.raises(ManifestError, match=r'gemm/build.toml:12: \[kernel.gemm\] depends: unknown dependency '
                                            r'"cutlas_4_0" \(known: torch, cutlass_X_Y'):
        gemm(tmp_path, cuda_depends='["torch", "cutlas_4_0"]')


def test_kernel_builder_projects_drop_unknown_capabilities_with_a_warning(tmp_path):
    caps = 'cuda-capabilities = ["8.0", "11.8", "12.0"]\n'
    m, warned = gemm(tmp_path, cuda_extra=caps, flake=True)
    assert m.kernel_builder and [str(c) for c in m.kernels[0].cuda_capabilities] == ["8.0", "12.0"]
    assert any('[kernel.gemm] cuda-capabilities: unknown capability "11.8" dropped' in w for w in warned)
    # a kbuild project (no kernel-builder flake) keeps the error
    with pytest.raises(ManifestError, match=r'\[kernel.gemm\] cuda-capabilities: unknown capability "11.8"'):
        gemm(tmp_path / "kbuild", cuda_extra=caps)
    # and a malformed one is an error for both
    with pytest.raises(ManifestError, match='unknown capability "eleven"'):
        gemm(tmp_path / "again", cuda_extra='cuda-capabilities = ["8.0", "eleven"]\n', flake=True)


@pytest.mark.skipif(not present(), reason=ABSENT)
@pytest.mark.parametrize("name", sorted(p.name for p in CORPUS.glob("*/")) if present() else ["(none)"])
def test_every_corpus_manifest_loads(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # edition 4 notes, megablocks' dropped 11.8
        m = load_manifest(CORPUS / name)
    assert m.kernel_builder, "every kernel-builder project has a flake.nix naming kernel-builder"


# -- plans ------------------------------------------------------------------------------------

CUTLASS = ("/tc/cutlass-4.2/cutlass_library/source/include", "/tc/cutlass-4.2/cutlass_library/source/tools/util/include")


def test_cutlass_includes_go_to_exactly_the_units_that_depend_on_it(tmp_path):
    m, _ = gemm(tmp_path)
    plan = plan_build(replace(inputs(m), dependency_includes={"cutlass_4_0": CUTLASS}))
    cuda = by_name(plan)[CU130_214]
    for src in ("gemm/gemm.cu", "gemm/util.cu"):
        flags = unit(cuda, src).flags
        assert [f for f in flags if f.startswith("-I/tc/")] == [f"-I{d}" for d in CUTLASS]
    assert not [f for f in unit(cuda, "plain/plain.cu").flags if f.startswith("-I/tc/")]
    # the binding links every section and has no depends of its own: it sees their dependencies'
    # headers, as kernel-builder's global include path gives them (flash-attn3's binding includes
    # cutlass/numeric_types.h), each folder once
    binding = unit(cuda, "torch_binding.cpp").flags
    assert [f for f in binding if f.startswith("-I/tc/")] == [f"-I{d}" for d in CUTLASS]
    assert unit(cuda, "gemm/gemm.cu").section == "gemm" and unit(cuda, "gemm/gemm.cu").depends == ("torch", "cutlass_4_0")
    with pytest.raises(ToolchainError, match=r"\[kernel.gemm\] depends: cutlass_4_0 was not provisioned"):
        plan_build(inputs(m))
    # listing (kbuild variants) plans without provisioning
    assert plan_build(replace(inputs(m), dependency_includes=None)).variants


def test_torch_cmake_flags_join_every_cuda_compile(tmp_path):
    config = tmp_path / "cuda.cmake"
    config.write_text(textwrap.dedent("""\
        if(ONNX_NAMESPACE)
          list(APPEND CUDA_NVCC_FLAGS "-DONNX_NAMESPACE=${ONNX_NAMESPACE}")
        else()
          list(APPEND CUDA_NVCC_FLAGS "-DONNX_NAMESPACE=onnx_c2")
        endif()
        list(APPEND CUDA_NVCC_FLAGS ${NVCC_FLAGS_EXTRA})
        # Set expt-relaxed-constexpr to suppress Eigen warnings
        list(APPEND CUDA_NVCC_FLAGS "--expt-relaxed-constexpr")
        list(APPEND CUDA_NVCC_FLAGS "--expt-extended-lambda")  # device lambdas
        foreach(FLAG ${CUDA_NVCC_FLAGS})
          list(APPEND CUDA_NVCC_FLAGS "-Xnot-this")
        endforeach()
        """))
    assert cmake_nvcc_flags(config) == ("--expt-relaxed-constexpr", "--expt-extended-lambda")
    assert cmake_nvcc_flags(tmp_path / "missing.cmake") == ()
    m, _ = gemm(tmp_path)
    torch = torch_info(cmake_nvcc_flags=("--expt-relaxed-constexpr", "--expt-extended-lambda"))
    plan = plan_build(replace(inputs(m, torch), dependency_includes={"cutlass_4_0": CUTLASS}))
    flags = unit(by_name(plan)[CU130_214], "plain/plain.cu").flags
    assert flags.count("--expt-relaxed-constexpr") == 1 and "--expt-extended-lambda" in flags


def test_torch_cmake_flags_of_the_installed_torch():
    spec = importlib.util.find_spec("torch")  # its files, without importing it
    config = Path(spec.origin).parent / "share" / "cmake" / "Caffe2" / "public" / "cuda.cmake" if spec else None
    if config is None or not config.is_file():
        pytest.skip("this torch ships no CMake config")
    assert "--expt-extended-lambda" in cmake_nvcc_flags(config)


def test_cuda_archs_restrict_a_build_and_mark_it_partial(tmp_path):
    m, _ = gemm(tmp_path, cuda_extra='cuda-capabilities = ["8.0", "9.0a", "10.0"]\n')
    base = replace(inputs(m), dependency_includes={"cutlass_4_0": CUTLASS})
    full = by_name(plan_build(base))[CU130_214]
    assert not full.partial_archs and "9.0a" in full.archs
    only = by_name(plan_build(replace(base, cuda_archs=Setting(parse_arch_list("9.0;12.0", FLAG), FLAG))))[CU130_214]
    # the section keeps its own spelling (9.0a); the default-list section takes the request as written
    assert gencodes(unit(only, "gemm/gemm.cu").flags) == ["-gencode=arch=compute_90a,code=sm_90a"]
    assert gencodes(unit(only, "plain/plain.cu").flags) == ["-gencode=arch=compute_90,code=sm_90",
                                                            "-gencode=arch=compute_120,code=sm_120"]
    assert only.partial_archs and set(only.archs) == {"9.0", "9.0a", "12.0"} and only.skipped_sections == ()
    # gemm lists none of 7.5: it is left out, and plain (on the defaults) still builds for 7.5
    other = by_name(plan_build(replace(base, cuda_archs=Setting(parse_arch_list("7.5", FLAG), FLAG))))[CU130_214]
    assert other.skipped_sections == (("gemm", ("8.0", "9.0a", "10.0")),)
    assert other.archs == ("7.5",) and other.partial_archs
    assert {u.section for u in other.units} == {"", "plain"}


def test_arch_lists_in_torch_spellings():
    assert parse_arch_list("8.0;9.0a", "x") == (parse_capability("8.0"), parse_capability("9.0a"))
    assert parse_arch_list("8.0 9.0+PTX", "x")[1].ptx
    with pytest.raises(ValueError, match=r'TORCH_CUDA_ARCH_LIST: unknown capability "8.5"'):
        parse_arch_list("8.0;8.5", "TORCH_CUDA_ARCH_LIST")


def test_nvcc_threads_use_the_cores_a_few_units_leave_idle(tmp_path):
    m, _ = gemm(tmp_path)
    plan = plan_build(replace(inputs(m), dependency_includes={"cutlass_4_0": CUTLASS}))
    variants = list(plan.variants)  # 3 nvcc units with 10 archs each
    assert nvcc_threads(variants, None, 16) == 6  # ceil(16 / 3)
    assert nvcc_threads(variants, 1, 16) == 10  # one at a time: at most one thread per arch
    assert nvcc_threads(variants, None, 2) == 1
    assert nvcc_threads(variants, None, 16, override=3) == 3
    assert nvcc_threads([], None, 16) == 1


# -- errors -----------------------------------------------------------------------------------


def test_missing_header_names_unit_include_and_the_dependency(tmp_path):
    m, _ = gemm(tmp_path, cuda_depends='["torch"]')
    cuda = by_name(plan_build(inputs(m)))[CU130_214]
    graph = m.root / ".kbuild"
    gcc = "../gemm/gemm.cu:3:10: fatal error: cutlass/cutlass.h: No such file or directory\ncompilation terminated.\n"
    assert failure_reason(unit(cuda, "gemm/gemm.cu"), gcc, m.root, graph) == (
        "gemm/gemm.cu: gemm/gemm.cu:3 includes cutlass/cutlass.h, which no include folder of the unit has; "
        'it comes with cutlass_X_Y: add it to [kernel.gemm] depends (e.g. "cutlass_3_8")')
    nvcc = f'{m.root}/gemm/gemm.cu(7): catastrophic error: cannot open source file "local/helpers.cuh"\n'
    assert failure_reason(unit(cuda, "gemm/gemm.cu"), nvcc, m.root, graph) == (
        "gemm/gemm.cu: gemm/gemm.cu:7 includes local/helpers.cuh, which no include folder of the unit has "
        "(add its folder to [kernel.gemm] include, or the header to the kernel)")
    other = "../gemm/gemm.cu(9): error: identifier \"foo\" is undefined\n"
    assert failure_reason(unit(cuda, "gemm/gemm.cu"), other, m.root, graph) == (
        'gemm/gemm.cu: ../gemm/gemm.cu(9): error: identifier "foo" is undefined')


def test_missing_header_of_a_dependency_the_section_has(tmp_path):
    m, _ = gemm(tmp_path)
    cuda = by_name(plan_build(replace(inputs(m), dependency_includes={"cutlass_4_0": CUTLASS})))[CU130_214]
    text = "../gemm/gemm.cu:3:10: fatal error: cute/arch/new_thing.hpp: No such file or directory\n"
    assert failure_reason(unit(cuda, "gemm/gemm.cu"), text, m.root, m.root / ".kbuild").endswith(
        "[kernel.gemm] depends on cutlass_4_0, whose headers lack it")


# -- publish ----------------------------------------------------------------------------------


def test_publish_refuses_partial_arch_builds_unless_allowed(tmp_path):
    meta = {"version": 1, "backend": {"type": "cuda", "archs": ["9.0a"], "archs-partial": True},
            "provenance": {"kernel": {"commit": "a" * 40, "dirty": False, "tree": "b" * 40}}}
    variant = LocalVariant(CU130_214, tmp_path, meta)
    with pytest.raises(PublishError, match=rf"{CU130_214} was built for CUDA archs 9.0a only \(--cuda-archs\)"):
        check_publishable([variant], allow_dirty=False)
    assert check_publishable([variant], allow_dirty=False, allow_partial_archs=True) == 1
    full = LocalVariant(CU130_214, tmp_path, json.loads(json.dumps(meta)))
    del full.metadata["backend"]["archs-partial"]
    assert check_publishable([full], allow_dirty=False) == 1
