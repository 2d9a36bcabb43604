"""--cuda-archs (TORCH_CUDA_ARCH_LIST, native) as users expect: sections on the default list take
the list; a section that names its own capabilities keeps those of the list it names, and is left
out, with one warning, when it names none of them; only a kernel left with nothing to compile is
an error. Plans by value (hand-made toolchains, no process) for a fixture project and two
kernels of the corpus; then one real nvcc build, its metadata.json and what publish says of it.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import replace

import pytest

from builder.backends.cuda_arch import parse_arch_list
from builder.config.cascade import Setting
from builder.plan.steps import Failure, plan_build
from builder.project.manifest import load_manifest
from corpus import corpus_kernel
from kbuild_common.errors import ManifestError
from plan_inputs import CPU_214, CU130_214, by_name, gencodes, inputs, linux_x86_64, write_kernel  # noqa: F401 (fixture)

FLAG = "--cuda-archs"

# A Hopper section and a Blackwell one beside it (what kernels-community projects do), plus a
# section on the default list. No source includes torch: the real build below is quick.
TWO_ARCHS = """\
[general]
name = "two-archs"
version = 1
edition = 5
license = "Apache-2.0"
backends = {backends}

[torch]
src = ["torch-ext/torch_binding.cpp"]

[kernel.hopper]
backend = "cuda"
depends = []
cuda-capabilities = ["9.0a"]
src = ["hopper/hopper.cu"]

[kernel.blackwell]
backend = "cuda"
depends = []
cuda-capabilities = [{blackwell}]
src = ["blackwell/blackwell.cu"]
{extra}"""
ANY_ARCH = """
[kernel.portable]
backend = "cuda"
depends = []
src = ["portable/portable.cu"]
"""
CPU_SECTION = """
[kernel.host]
backend = "cpu"
depends = []
src = ["host/host.cpp"]
"""
BLACKWELL_ONLY = TWO_ARCHS.replace('[kernel.hopper]\nbackend = "cuda"\ndepends = []\ncuda-capabilities = ["9.0a"]\n'
                                   'src = ["hopper/hopper.cu"]\n\n', "")


def two_archs(tmp_path, blackwell='"10.0a"', extra="", backends='["cuda"]', toml=TWO_ARCHS):
    return write_kernel(tmp_path / "two-archs", toml.format(blackwell=blackwell, extra=extra, backends=backends))


def restricted(m, archs: str, source: str = "--cuda-archs", **kw):
    return plan_build(replace(inputs(m), cuda_archs=Setting(parse_arch_list(archs, source), source)), **kw)


def section_archs(variant) -> dict[str, list[str]]:
    """Kernel section -> the gencode flags of its units."""
    return {u.section: gencodes(u.flags) for u in variant.units if u.tool == "nvcc"}


@pytest.mark.parametrize("blackwell", ['"10.0a"', '"10.0f"'])
def test_a_section_for_another_gpu_is_left_out_not_refused(tmp_path, linux_x86_64, blackwell):
    m = two_archs(tmp_path, blackwell, extra=ANY_ARCH)
    cuda = by_name(restricted(m, "9.0a"))[CU130_214]
    assert section_archs(cuda) == {"hopper": ["-gencode=arch=compute_90a,code=sm_90a"],
                                   "portable": ["-gencode=arch=compute_90a,code=sm_90a"]}  # defaults take the list
    assert cuda.skipped_sections == (("blackwell", (blackwell.strip('"'),)),)
    assert cuda.archs == ("9.0a",) and cuda.partial_archs
    # without a list, and with one naming 10.0 (the section keeps its own spelling), it is built
    assert by_name(plan_build(inputs(m)))[CU130_214].skipped_sections == ()
    both = by_name(restricted(m, "9.0a;10.0"))[CU130_214]
    assert both.skipped_sections == ()
    assert section_archs(both)["blackwell"] == [f"-gencode=arch=compute_100{blackwell[-2]},code=sm_100{blackwell[-2]}"]


def test_torch_cuda_arch_list_is_named_and_9_0_keeps_9_0a(tmp_path, linux_x86_64):
    m = two_archs(tmp_path)
    cuda = by_name(restricted(m, "9.0", "TORCH_CUDA_ARCH_LIST"))[CU130_214]
    assert section_archs(cuda) == {"hopper": ["-gencode=arch=compute_90a,code=sm_90a"]}
    assert cuda.skipped_sections == (("blackwell", ("10.0a",)),)


def test_a_kernel_left_with_nothing_to_compile_is_an_error(tmp_path, linux_x86_64):
    m = two_archs(tmp_path, toml=BLACKWELL_ONLY, backends='["cpu", "cuda"]', extra=CPU_SECTION)
    line = m.path.read_text().splitlines().index('cuda-capabilities = ["10.0a"]') + 1
    message = (f"{m.path}:{line}: [kernel.blackwell] cuda-capabilities: none of 10.0a is in TORCH_CUDA_ARCH_LIST "
               "9.0, and no other section has CUDA code: nothing to compile (build with archs this kernel lists)")
    with pytest.raises(ManifestError) as info:
        restricted(m, "9.0", "TORCH_CUDA_ARCH_LIST")
    assert str(info.value) == message
    # a build goes on with the kernel's other variants: that one alone is failed
    plan = restricted(m, "9.0", "TORCH_CUDA_ARCH_LIST", isolate=True)
    assert [v.name for v in plan.variants] == [CPU_214]
    assert plan.failed == (Failure(CU130_214, message),)


def test_two_sections_left_with_nothing_name_both(tmp_path, linux_x86_64):
    m = two_archs(tmp_path, toml=TWO_ARCHS.replace('["9.0a"]', '["8.0", "8.6"]'))
    with pytest.raises(ManifestError, match=r"\[kernel.hopper\] cuda-capabilities: none of 8.0, 8.6 is in "
                                            r"--cuda-archs 9.0a, nor any of \[kernel.blackwell\]'s 10.0a, and no "
                                            r"other section has CUDA code: nothing to compile"):
        restricted(m, "9.0a")


# -- the corpus: real kernel-builder manifests, planned -----------------------------------------


def corpus(name: str):
    folder = corpus_kernel(name)
    with warnings.catch_warnings():  # punica-sgmv is an edition-4 manifest: read with a warning
        warnings.simplefilter("ignore")
        return load_manifest(folder)


def test_punica_sgmv_for_turing_leaves_its_two_listed_sections_out(linux_x86_64):
    """bgmv and sgmv_flashinfer list 8.0 … 12.0; sgmv is on the defaults; punica_kernels is host code."""
    m = corpus("punica-sgmv")
    cuda = by_name(plan_build(replace(inputs(m), dependency_includes=None,
                                      cuda_archs=Setting(parse_arch_list("7.5", FLAG), FLAG))))[CU130_214]
    listed = ("8.0", "8.6", "8.7", "8.9", "9.0", "10.0", "10.1", "12.0")
    assert cuda.skipped_sections == (("bgmv", listed), ("sgmv_flashinfer", listed))
    assert section_archs(cuda) == {"sgmv": ["-gencode=arch=compute_75,code=sm_75"]}
    assert {u.section for u in cuda.units} == {"", "sgmv", "punica_kernels"}
    assert cuda.archs == ("7.5",) and cuda.partial_archs
    # a Hopper build keeps all four: the listed ones take 9.0 from their lists
    hopper = by_name(plan_build(replace(inputs(m), dependency_includes=None,
                                        cuda_archs=Setting(parse_arch_list("9.0", FLAG), FLAG))))[CU130_214]
    assert hopper.skipped_sections == () and set(section_archs(hopper)) == {"bgmv", "sgmv_flashinfer", "sgmv"}


def test_nvfp4_gemm_for_hopper_has_nothing_to_compile(linux_x86_64):
    """Its one section lists 10.0a and 12.0a (Blackwell only)."""
    m = corpus("nvfp4-gemm")
    plan = plan_build(replace(inputs(m), dependency_includes=None,
                              cuda_archs=Setting(parse_arch_list("9.0a", FLAG), FLAG)), isolate=True)
    assert plan.variants == ()
    (failure,) = plan.failed
    assert failure.variant == "torch-stable-abi29-cu130-x86_64-linux"
    assert re.search(r"nvfp4-gemm/build\.toml:\d+: \[kernel\.nvfp4_gemm\] cuda-capabilities: none of 10\.0a, "
                     r"12\.0a is in --cuda-archs 9\.0a, and no other section has CUDA code: nothing to compile",
                     failure.reason), failure.reason
    blackwell = plan_build(replace(inputs(m), dependency_includes=None,
                                   cuda_archs=Setting(parse_arch_list("10.0", FLAG), FLAG)))
    assert blackwell.variants[0].archs == ("10.0a",) and blackwell.variants[0].skipped_sections == ()
