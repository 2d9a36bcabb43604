"""The load-time checks of kbuild.fit that need no hub: NVIDIA's arch compatibility rules over a
table of cases, ROCm's exact gfx match, python-depends against this environment (real packages
looked up with the real import machinery), the free-threaded refusal, and KBUILD_GPU_ARCH."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kbuild import choice, fit, gpu_arch
from kbuild.choice import format_trace, resolve
from kbuild.gpu_arch import CudaArch, device_fit, parse_cuda_arch, parse_device
from kbuild.metadata import VariantMetadata
from kbuild.python_depends import missing
from kbuild.variants import SystemInfo, parse_variant


def why_not(variant, system):
    return fit.judge(variant, system).reason


H200 = SystemInfo((2, 14), "cuda", (13, 0), "x86_64", "linux", gpu_arch="9.0")

# (recorded arch, device capability, how it runs there: "sass", "ptx" or None)
CASES = [
    ("8.0", (8, 0), "sass"),
    ("8.0", (8, 6), "sass"),  # same major, newer minor
    ("8.0", (8, 9), "sass"),
    ("8.6", (8, 0), None),  # an older minor cannot run newer SASS
    ("8.0", (9, 0), None),  # SASS never crosses a major
    ("8.0+PTX", (9, 0), "ptx"),  # PTX JIT-compiles for any newer device
    ("8.0+PTX", (12, 0), "ptx"),
    ("8.0+PTX", (8, 6), "sass"),
    ("9.0+PTX", (8, 9), None),  # PTX does not run on an older device
    ("12.1+PTX", (12, 1), "sass"),
    ("9.0a", (9, 0), "sass"),
    ("9.0a", (10, 0), None),  # arch-specific: exactly that capability
    ("9.0a+PTX", (10, 0), None),  # arch-specific PTX is not forward compatible either
    ("10.0a", (10, 3), None),
    ("10.0f", (10, 0), "sass"),  # family-specific: the same family
    ("10.0f", (10, 3), "sass"),
    ("10.3f", (10, 0), None),
    ("10.0f", (12, 0), None),
    ("10.0f+PTX", (12, 0), None),  # family PTX stays in its family
    ("12.0f", (12, 1), "sass"),
    ("12.0", (12, 1), "sass"),
    ("7.5", (8, 0), None),
]


@pytest.mark.parametrize("arch, device, way", CASES)
def test_nvidia_compatibility_table(arch, device, way):
    assert parse_cuda_arch(arch).runs_on(device) == way


def test_arch_spellings():
    assert parse_cuda_arch("9.0a+PTX") == CudaArch(9, 0, "a", True)
    assert parse_cuda_arch("12.1+PTX") == CudaArch(12, 1, "", True)
    assert parse_cuda_arch("10.0f") == CudaArch(10, 0, "f", False)
    for bad in ("sm_90", "9", "9.0b", "gfx90a", "9.0+ptx"):
        assert parse_cuda_arch(bad) is None, bad


def test_a_hopper_only_build_is_rejected_on_ampere_with_both_sides_named():
    fit_ = device_fit("cuda", ("9.0a",), "8.6")
    assert fit_.problem == "built for CUDA archs 9.0a, none of which runs on this GPU (compute capability 8.6)"
    assert device_fit("cuda", ("9.0a",), "9.0") == gpu_arch.Fit()


def test_kernel_builders_default_list_runs_everywhere_newer_through_ptx():
    defaults = tuple("7.5 8.0 8.6 8.7 8.9 9.0 10.0 11.0 12.0 12.1+PTX".split())
    assert device_fit("cuda", defaults, "9.0") == gpu_arch.Fit()
    assert device_fit("cuda", defaults, "7.0").problem is not None  # Volta: nothing built for it
    later = device_fit("cuda", defaults, "13.0")  # a device newer than every SASS: the PTX
    assert later.problem is None and later.note == "this GPU (13.0) runs it by JIT-compiling the PTX of 12.1+PTX"


def test_no_recorded_archs_or_no_device_means_unchecked():
    unchecked = device_fit("cuda", (), "9.0")
    assert unchecked.problem is None and "no CUDA archs recorded" in unchecked.note
    assert device_fit("cuda", ("9.0a",), None) == gpu_arch.Fit()  # no GPU: nothing to check against
    assert device_fit("cpu", ("9.0a",), "9.0") == gpu_arch.Fit()
    odd = device_fit("cuda", ("sm_200x",), "9.0")  # a spelling from a newer builder: cannot tell
    assert odd.problem is None and "not understood" in odd.note
    # a known spelling that cannot run counts, however many unknown ones sit beside it
    assert device_fit("cuda", ("sm_200x", "8.0"), "9.0").problem is not None


def test_rocm_needs_the_exact_gfx_arch():
    assert device_fit("rocm", ("gfx90a", "gfx942"), "gfx942") == gpu_arch.Fit()
    assert device_fit("rocm", ("gfx90a",), "gfx942").problem == "built for ROCm archs gfx90a; this GPU is gfx942"
    assert parse_device("rocm", "gfx90a:sramecc+:xnack-", "x") == "gfx90a"


def test_device_spellings_are_checked():
    assert parse_device("cuda", " 9.0 ", "KBUILD_GPU_ARCH") == "9.0"
    with pytest.raises(ValueError, match=r"KBUILD_GPU_ARCH: expected a CUDA compute capability such as 9.0 or "
                                         r"12.0, got 'sm_90'"):
        parse_device("cuda", "sm_90", "KBUILD_GPU_ARCH")
    with pytest.raises(ValueError, match="expected a ROCm GPU arch such as gfx942"):
        parse_device("rocm", "9.0", "KBUILD_GPU_ARCH")


# --- the metadata verdict (kbuild.fit) --------------------------------------------------------------


def meta(archs=(), depends=(), backend="cuda") -> VariantMetadata:
    return VariantMetadata.from_dict({"python-depends": list(depends), "backend": {"type": backend, "archs": list(archs)}})


def test_the_verdict_in_a_trace():
    names = ["torch214-cxx11-cu130-x86_64-linux", "torch-stable-abi210-cu130-x86_64-linux", "torch-cuda"]
    trace = resolve(names, H200)
    for name, recorded in zip(names, (meta(["10.0a"]), meta([]), meta([])), strict=True):
        trace = choice.apply(trace, name, fit.judge(parse_variant(name), H200, recorded))
    assert format_trace(trace).splitlines() == [
        "  torch-stable-abi210-cu130-x86_64-linux: fits (no CUDA archs recorded, so not checked against this GPU "
        "(9.0))",
        "  torch-cuda: fits",  # Python-only: no device code, nothing to check
        "  torch214-cxx11-cu130-x86_64-linux: rejected (built for CUDA archs 10.0a, none of which runs on this "
        "GPU (compute capability 9.0))",
    ]


def test_a_python_only_build_that_records_archs_is_held_to_them():
    # [torch-noarch] cuda-capabilities: a Triton kernel may name the GPUs it supports
    assert "none of which runs" in fit.judge(parse_variant("torch-cuda"), H200, meta(["10.0"])).reason


def test_a_cpu_variant_on_a_cuda_torch_is_not_judged_by_the_gpu():
    # a CPU variant fits a CUDA torch when no GPU is visible; its archs are not held against one
    no_gpu = replace(H200, device_visible=False)
    assert fit.judge(parse_variant("torch-cpu"), no_gpu, meta(["9.0a"], backend="cpu")) == fit.Verdict()
    assert fit.judge(parse_variant("torch-cuda"), H200, None) == fit.Verdict()  # metadata unknown (offline, not cached)


def test_python_depends_name_the_missing_package_in_one_line(monkeypatch, tmp_path):
    assert missing(("einops",), "cuda") is None  # installed here (a kbuild test dependency)
    assert missing(("tvm-ffi",), "cuda") == ("needs the Python package apache-tvm-ffi, not installed here: "
                                            "pip install apache-tvm-ffi")
    both = missing(("tvm-ffi", "nvidia-cutlass-dsl"), "cuda")
    assert both.endswith("pip install apache-tvm-ffi nvidia-cutlass-dsl") and "\n" not in both
    # nvidia-cutlass-dsl is a CUDA dependency in kernel-builder's allow-list, not a CPU one
    assert "does not know" in missing(("nvidia-cutlass-dsl",), "cpu")
    assert "'left-pad', which this kbuild does not know" in missing(("left-pad",), "cuda")
    assert missing(("onednn",), "xpu") is None  # libraries only: no module to look for
    # once the module can be found, the dependency is met
    (tmp_path / "tvm_ffi").mkdir()
    (tmp_path / "tvm_ffi" / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert missing(("tvm-ffi",), "cuda") is None


def test_python_depends_reject_a_variant():
    verdict = fit.judge(parse_variant("torch-cuda"), H200, meta(["9.0"], ["tvm-ffi"]))
    assert verdict.reason.startswith("needs the Python package apache-tvm-ffi")


def test_a_free_threaded_python_refuses_compiled_variants_only():
    free = replace(H200, free_threaded=True)
    assert "free-threaded Python cannot import" in why_not(parse_variant("torch214-cxx11-cu130-x86_64-linux"), free)
    assert "free-threaded" in why_not(parse_variant("torch-stable-abi210-cu130-x86_64-linux"), free)
    assert why_not(parse_variant("torch-cuda"), free) is None  # Python-only builds import fine
    assert why_not(parse_variant("torch-universal"), free) is None
    assert free.describe().endswith(", free-threaded Python")
    assert H200.describe() == "torch 2.14, cu130 on a GPU of compute capability 9.0, x86_64-linux"


def test_this_python_is_detected_as_it_is():
    import sysconfig

    from kbuild.variants import free_threaded_python

    assert free_threaded_python() == bool(sysconfig.get_config_var("Py_GIL_DISABLED"))


def test_every_arch_spelling_the_builder_records_is_understood():
    # metadata.json backend.archs is str(Capability) (builder/stage/variant_folder.py): the runtime reads each alike
    from builder.backends.cuda_arch import KNOWN_BASES, parse_capability

    for base in KNOWN_BASES:
        for suffix in ("", "a", "f") if float(base) >= 9.0 else ("",):
            for ptx in ("", "+PTX"):
                cap = parse_capability(base + suffix + ptx)
                assert parse_cuda_arch(str(cap)) == CudaArch(cap.major, cap.minor, cap.suffix, cap.ptx)
