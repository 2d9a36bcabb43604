"""Variant names: round trips over real names, rejects, and the rules that pick one for a system."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import pytest

from kbuild import variants as v
from kbuild.choice import choose, format_trace, resolve
from kbuild.fit import judge
from kbuild.variants import (
    Compute,
    Noarch,
    Platform,
    Python,
    Sdk,
    SystemInfo,
    Torch,
    TorchStableAbi,
    TvmFfi,
    Universal,
    Variant,
    parse_variant,
)


def why_not(variant, system):
    return judge(variant, system).reason


X86, ARM = Platform("x86_64", "linux"), Platform("aarch64", "linux")
MAC = Platform("aarch64", "darwin")
PY39, PY310 = Python((3, 9)), Python((3, 10))


def compiled(torch, backend, version=None, platform=X86, cxx11=True, python=None):
    return Variant(framework=Torch(torch, cxx11), compute=Compute(backend, version), python=python, platform=platform)


REAL_NAMES = {
    "torch214-cxx11-cu130-x86_64-linux": compiled((2, 14), "cuda", (13, 0)),
    "torch213-cxx11-cpu-x86_64-linux": compiled((2, 13), "cpu"),
    "torch29-cxx11-cu126-aarch64-linux": compiled((2, 9), "cuda", (12, 6), ARM),
    "torch27-cxx98-cu118-x86_64-linux": compiled((2, 7), "cuda", (11, 8), cxx11=False),
    "torch-stable-abi210-cu130-x86_64-linux":
        Variant(framework=TorchStableAbi((2, 10)), compute=Compute("cuda", (13, 0)), platform=X86),
    "torch-stable-abi210-cpu-aarch64-darwin":
        Variant(framework=TorchStableAbi((2, 10)), compute=Compute("cpu"), platform=MAC),
    "torch213-metal-aarch64-darwin": compiled((2, 13), "metal", platform=MAC),
    "torch214-cxx11-rocm63-x86_64-linux": compiled((2, 14), "rocm", (6, 3)),
    "torch214-cxx11-xpu20251-x86_64-linux": compiled((2, 14), "xpu", (2025, 1)),
    "torch-cuda": Variant(framework=Noarch(), compute=Compute("cuda")),
    "torch-cpu": Variant(framework=Noarch(), compute=Compute("cpu")),
    "torch-rocm": Variant(framework=Noarch(), compute=Compute("rocm")),
    "torch-xpu": Variant(framework=Noarch(), compute=Compute("xpu")),
    "torch-metal": Variant(framework=Noarch(), compute=Compute("metal")),
    "torch-universal": Variant(framework=Universal()),
    # a Linux name without the C++ ABI tag fits either ABI (kernels reads it so)
    "torch214-cu130-x86_64-linux": compiled((2, 14), "cuda", (13, 0), cxx11=None),
    "torch211-cxx11-rocm714-x86_64-linux": compiled((2, 11), "rocm", (7, 14)),
    "torch211-cxx11-cann83-aarch64-linux": compiled((2, 11), "cann", (8, 3), ARM),
    "tvm-ffi01-cu130-x86_64-linux": Variant(framework=TvmFfi((0, 1)), compute=Compute("cuda", (13, 0)), platform=X86),
    # kernels 0.19's names: a minimum CPython and its ABI before the platform
    "torch-2.11-cuda-13.0-cpython-3.9-abi3-x86_64-linux": compiled((2, 11), "cuda", (13, 0), cxx11=None, python=PY39),
    "torch-2.11-cxx11-cpu-cpython-3.10-abi3-aarch64-linux": compiled((2, 11), "cpu", platform=ARM, python=PY310),
    "torch-2.11-metal-cpython-3.9-abi3-aarch64-darwin":
        compiled((2, 11), "metal", platform=MAC, cxx11=None, python=PY39),
    "torch-stable-abi-2.10-cuda-13.0-cpython-3.10-abi3-x86_64-linux":
        Variant(framework=TorchStableAbi((2, 10)), compute=Compute("cuda", (13, 0)), python=PY310, platform=X86),
    "torch-stable-abi-2.12-rocm-7.2-cpython-3.15-abi3t-x86_64-linux":
        Variant(framework=TorchStableAbi((2, 12)), compute=Compute("rocm", (7, 2)), python=Python((3, 15), "abi3t"),
                platform=X86),
    "tvm-ffi-0.1-xpu-2025.3-cpython-3.9-abi3-x86_64-linux":
        Variant(framework=TvmFfi((0, 1)), compute=Compute("xpu", (2025, 3)), python=PY39, platform=X86),
    "mlx-metal": Variant(framework=Noarch("mlx"), compute=Compute("metal")),
    "sdk": Variant(framework=Sdk()),
    "sdk-cuda": Variant(framework=Sdk(), compute=Compute("cuda")),
    "sdk-cpython-3.10-abi3-x86_64-linux": Variant(framework=Sdk(), python=PY310, platform=X86),
    "sdk-cuda-13.0-cpython-3.10-abi3-x86_64-linux":
        Variant(framework=Sdk(), compute=Compute("cuda", (13, 0)), python=PY310, platform=X86),
}

CUDA130 = SystemInfo((2, 14), "cuda", (13, 0), "x86_64", "linux")


@pytest.mark.parametrize("name", sorted(REAL_NAMES))
def test_parse_gives_the_expected_variant(name):
    assert parse_variant(name) == REAL_NAMES[name]


@pytest.mark.parametrize("name", sorted(REAL_NAMES))
def test_name_round_trips(name):
    assert parse_variant(name).name == name
    assert str(parse_variant(name)) == name


@pytest.mark.parametrize(
    "name",
    [
        "",
        "torch",
        "torch-gpu",
        "torch-universal2",
        "Torch214-cxx11-cu130-x86_64-linux",
        "torch-2.14-cuda-13.0-x86_64-linux",  # the 0.19 form needs its cpython part
        "torch-2.14-cuda-13.0-cpython-3.9-abi4-x86_64-linux",
        "torch-2.14-cuda-13.0-cpython-3.14-abi3t-x86_64-linux",  # abi3t exists from Python 3.15
        "torch-2.14-cu130-cpython-3.9-abi3-x86_64-linux",  # a legacy compute tag in the new form
        "torch214-cuda-13.0-x86_64-linux",  # and the other way round
        "torch-2.14-cxx11-metal-cpython-3.9-abi3-aarch64-darwin",  # the ABI tag is Linux's
        "sdk-cuda-13.0",  # a versioned SDK backend comes with compiled code
        "mlx-gpu",
        "torch213-cxx11-metal-aarch64-darwin",  # macOS has none
        "torch214-cxx11-cu130-riscv64-linux",
        "torch214-cxx11-cu130-x86_64-windows",
        "torch214-cxx11-npu130-x86_64-linux",
        "torch214-cxx11-cu130-x86_64-linux-extra",
        "torch-stable-abi210-cu130-x86_64",
        "torch-stable-abi-cu130-x86_64-linux",
    ],
)
def test_malformed_names_are_rejected(name):
    with pytest.raises(ValueError):
        parse_variant(name)


def test_reject_message_shows_the_expected_forms():
    with pytest.raises(ValueError, match="torch214-cxx11-cu130-x86_64-linux"):
        parse_variant("cuda-kernel")


@pytest.mark.parametrize(
    "tag, parsed",
    [("cu130", ("cuda", (13, 0))), ("cu126", ("cuda", (12, 6))), ("rocm63", ("rocm", (6, 3))),
     ("xpu20251", ("xpu", (2025, 1))), ("cpu", ("cpu", None)), ("metal", ("metal", None))],
)
def test_compute_tags_round_trip(tag, parsed):
    assert v.parse_compute(tag) == parsed
    assert v.format_compute(*parsed) == tag


def test_compiled_variant_of_a_system():
    assert CUDA130.compiled_variant().name == "torch214-cxx11-cu130-x86_64-linux"
    assert CUDA130.describe() == "torch 2.14, cu130, x86_64-linux"


@pytest.mark.parametrize(
    "name, runtime, fits",
    [
        ("torch214-cxx11-cu130-x86_64-linux", (13, 0), True),
        ("torch214-cxx11-cu126-x86_64-linux", (12, 9), True),  # newer minor runtime
        ("torch214-cxx11-cu129-x86_64-linux", (12, 9), True),
        ("torch214-cxx11-cu129-x86_64-linux", (12, 6), False),  # runtime older than the build
        ("torch214-cxx11-cu129-x86_64-linux", (13, 0), False),  # other major
        ("torch214-cxx11-cu130-x86_64-linux", (12, 9), False),
    ],
)
def test_cuda_same_major_and_runtime_minor_at_least_build_minor(name, runtime, fits):
    system = SystemInfo((2, 14), "cuda", runtime, "x86_64", "linux")
    assert (why_not(parse_variant(name), system) is None) is fits


def test_cuda_reason_names_both_versions():
    system = SystemInfo((2, 14), "cuda", (12, 6), "x86_64", "linux")
    reason = why_not(parse_variant("torch214-cxx11-cu129-x86_64-linux"), system)
    assert "CUDA 12.9" in reason and "CUDA 12.6" in reason


@pytest.mark.parametrize("torch, fits", [((2, 9), False), ((2, 10), True), ((2, 14), True), ((3, 0), True)])
def test_stable_abi_fits_torch_at_least_its_abi(torch, fits):
    system = SystemInfo(torch, "cuda", (13, 0), "x86_64", "linux")
    reason = why_not(parse_variant("torch-stable-abi210-cu130-x86_64-linux"), system)
    assert (reason is None) is fits
    if not fits:
        assert "needs torch >= 2.10" in reason


@pytest.mark.parametrize(
    "name, reason_part",
    [
        ("torch213-cxx11-cu130-x86_64-linux", "torch 2.13"),
        ("torch214-cxx98-cu130-x86_64-linux", "C++ ABI"),
        ("torch214-cxx11-cu130-aarch64-linux", "aarch64-linux"),
        ("torch214-cxx11-cpu-x86_64-linux", "built for cpu"),
        ("torch-rocm", "built for rocm"),
        ("torch213-metal-aarch64-darwin", "built for metal"),
    ],
)
def test_compiled_variants_need_the_exact_system(name, reason_part):
    assert reason_part in why_not(parse_variant(name), CUDA130)


def test_rocm_takes_the_same_major_and_an_older_minor_xpu_the_exact_version():
    # kernels 0.18 relaxed ROCm to CUDA's rule
    rocm = SystemInfo((2, 14), "rocm", (6, 3), "x86_64", "linux")
    assert why_not(parse_variant("torch214-cxx11-rocm63-x86_64-linux"), rocm) is None
    assert why_not(parse_variant("torch214-cxx11-rocm62-x86_64-linux"), rocm) is None
    assert why_not(parse_variant("torch214-cxx11-rocm64-x86_64-linux"), rocm) == \
        "built for ROCm 6.4, this torch uses ROCm 6.3"
    assert "ROCm 7.0" in why_not(parse_variant("torch214-cxx11-rocm70-x86_64-linux"), rocm)
    xpu = SystemInfo((2, 14), "xpu", (2025, 1), "x86_64", "linux")
    assert why_not(parse_variant("torch214-cxx11-xpu20251-x86_64-linux"), xpu) is None
    assert why_not(parse_variant("torch214-cxx11-xpu20250-x86_64-linux"), xpu) is not None


def test_metal_on_macos():
    mac = SystemInfo((2, 13), "metal", None, "aarch64", "darwin")
    assert choose(["torch213-metal-aarch64-darwin", "torch-universal"], mac).name == "torch213-metal-aarch64-darwin"


def test_preference_stable_abi_then_compiled_then_backend_then_universal():
    names = [
        "torch-universal",
        "torch-cuda",
        "torch214-cxx11-cu130-x86_64-linux",
        "torch-stable-abi210-cu130-x86_64-linux",
    ]
    trace = resolve(names, CUDA130)
    assert [c.name for c in trace] == [
        "torch-stable-abi210-cu130-x86_64-linux",
        "torch214-cxx11-cu130-x86_64-linux",
        "torch-cuda",
        "torch-universal",
    ]
    assert all(c.accepted for c in trace)
    # Each falls back to the next when the better ones are gone.
    for i in range(len(names)):
        remaining = [c.name for c in trace[i:]]
        assert choose(remaining, CUDA130).name == trace[i].name


def test_closest_cuda_and_newest_stable_abi_win_within_a_kind():
    system = SystemInfo((2, 14), "cuda", (12, 9), "x86_64", "linux")
    compiled = ["torch214-cxx11-cu126-x86_64-linux", "torch214-cxx11-cu129-x86_64-linux", "torch214-cxx11-cu128-x86_64-linux"]
    assert choose(compiled, system).name == "torch214-cxx11-cu129-x86_64-linux"
    stable = ["torch-stable-abi210-cu129-x86_64-linux", "torch-stable-abi212-cu129-x86_64-linux"]
    assert choose(stable, system).name == "torch-stable-abi212-cu129-x86_64-linux"


def test_cpu_backend_in_a_cuda_torch():
    cpu = SystemInfo((2, 14), "cpu", None, "x86_64", "linux")
    names = [
        "torch214-cxx11-cu130-x86_64-linux",
        "torch-cuda",
        "torch214-cxx11-cpu-x86_64-linux",
        "torch-cpu",
        "torch-universal",
    ]
    trace = resolve(names, cpu)
    assert [c.name for c in trace if c.accepted] == ["torch214-cxx11-cpu-x86_64-linux", "torch-cpu", "torch-universal"]
    assert {c.name for c in trace if not c.accepted} == {"torch214-cxx11-cu130-x86_64-linux", "torch-cuda"}


def test_a_cuda_torch_without_a_visible_gpu_puts_cpu_variants_first():
    no_gpu = replace(CUDA130, device_visible=False)
    names = ["torch-stable-abi210-cu130-x86_64-linux", "torch214-cxx11-cpu-x86_64-linux",
             "torch-stable-abi210-cpu-x86_64-linux", "torch-universal"]
    trace = resolve(names, no_gpu)
    assert [c.name for c in trace][:2] == ["torch-stable-abi210-cpu-x86_64-linux", "torch214-cxx11-cpu-x86_64-linux"]
    assert all(c.accepted for c in trace)
    cuda = next(c for c in trace if "cu130" in c.name)
    assert cuda.note == "after CPU variants: no CUDA device is visible"
    assert "torch-stable-abi210-cu130-x86_64-linux: fits (after CPU variants: no CUDA device is visible)" \
        in format_trace(trace)
    assert "no visible CUDA device (CPU variants first)" in no_gpu.describe()
    # a kernel with only GPU builds still loads its best one; with a GPU nothing changes
    assert choose(["torch-stable-abi210-cu130-x86_64-linux"], no_gpu).name.endswith("cu130-x86_64-linux")
    assert choose(names, CUDA130).name == "torch-stable-abi210-cu130-x86_64-linux"
    # the CPU variant still has to fit the CPU side of this torch
    assert not choose(["torch213-cxx11-cpu-x86_64-linux"], no_gpu)


def test_resolve_keeps_unparseable_names_in_the_trace():
    trace = resolve(["README.md", "torch-cuda"], CUDA130)
    assert trace[0].name == "torch-cuda" and trace[0].accepted
    assert trace[1].reason == "not a variant name" and trace[1].variant is None


def test_choose_is_none_when_nothing_fits():
    assert choose(["torch213-cxx11-cu130-x86_64-linux", "torch-cpu"], CUDA130) is None
    assert choose([], CUDA130) is None


def test_format_trace_one_line_per_candidate():
    text = format_trace(resolve(["torch-cuda", "torch-rocm"], CUDA130))
    assert text.splitlines() == [
        "  torch-cuda: fits",
        "  torch-rocm: rejected (built for rocm, this system uses cuda)",
    ]


@pytest.mark.parametrize(
    "version, expected",
    [
        (SimpleNamespace(cuda="12.9", hip=None, xpu=None), ("cuda", (12, 9))),
        (SimpleNamespace(cuda=None, hip="6.3.42131-fa1d09cbd", xpu=None), ("rocm", (6, 3))),
        # torch reports oneAPI as a date; Hugging Face's loader reads year + index 5.
        (SimpleNamespace(cuda=None, hip=None, xpu="20250101"), ("xpu", (2025, 1))),
    ],
)
def test_native_backend_versions(version, expected):
    assert v._native_backend(SimpleNamespace(version=version)) == expected


def test_detect_system_describes_the_running_torch():
    torch = pytest.importorskip("torch")
    system = v.detect_system()
    major, minor = (int(p) for p in torch.__version__.split(".")[:2])
    assert system.torch == (major, minor)
    assert (system.cpu, system.os) == (v.host_cpu(), v.host_os())
    if torch.version.cuda:
        assert system.backend == "cuda"
        assert system.compute_version == tuple(int(p) for p in torch.version.cuda.split(".")[:2])
        assert system.compiled_variant().compute.tag.startswith("cu")
        cpu = v.detect_system("cpu")
        assert (cpu.backend, cpu.compute_version) == ("cpu", None)
        assert system.device_visible == torch.cuda.is_available()  # this machine: False, no GPU
        assert v.detect_system("cuda").device_visible  # asked for by name: no CPU preference
    with pytest.raises(ValueError, match="unknown backend"):
        v.detect_system("gpu")
    other = "rocm" if system.backend != "rocm" else "cuda"
    with pytest.raises(ValueError, match="not available"):
        v.detect_system(other)


CPU311 = SystemInfo((2, 11), "cpu", None, "x86_64", "linux", python=(3, 11))


@pytest.mark.parametrize(
    "name, system, reason",
    [
        ("torch-2.11-cpu-cpython-3.11-abi3-x86_64-linux", CPU311, None),
        ("torch-2.11-cpu-cpython-3.9-abi3-x86_64-linux", CPU311, None),  # a minimum, not an exact version
        ("torch-2.11-cpu-cpython-3.12-abi3-x86_64-linux", CPU311, "needs Python >= 3.12, this is Python 3.11"),
        ("torch211-cxx11-cpu-x86_64-linux", replace(CPU311, python=(3, 8)), "needs Python >= 3.9, this is Python 3.8"),
        # abi3 never loads into a free-threaded Python; abi3t (3.15+) loads into both kinds
        ("torch-2.11-cpu-cpython-3.9-abi3-x86_64-linux", replace(CPU311, python=(3, 15), free_threaded=True),
         "a compiled (.abi3.so) build, which a free-threaded Python cannot import; use a Python with the GIL "
         "(or an abi3t build, Python 3.15+)"),
        ("torch-2.11-cpu-cpython-3.15-abi3t-x86_64-linux", replace(CPU311, python=(3, 15), free_threaded=True), None),
        ("torch-2.11-cpu-cpython-3.15-abi3t-x86_64-linux", replace(CPU311, python=(3, 15)), None),
        ("torch-2.11-cpu-cpython-3.15-abi3t-x86_64-linux", CPU311, "needs Python >= 3.15, this is Python 3.11"),
        ("torch-cpu", replace(CPU311, free_threaded=True), None),  # no compiled code
        ("sdk-cpython-3.12-abi3-x86_64-linux", CPU311, "needs Python >= 3.12, this is Python 3.11"),
        ("sdk-cuda", CPU311, "built for cuda, this system uses cpu"),
        ("sdk", CPU311, None),
        ("tvm-ffi01-cpu-x86_64-linux", CPU311, "built for tvm-ffi 0.1, this has no tvm-ffi installed"),
        ("tvm-ffi01-cpu-x86_64-linux", replace(CPU311, tvm_ffi=(0, 1)), None),
        ("mlx-metal", replace(CPU311, backend="metal", os="darwin"), "an MLX kernel, and MLX is not installed"),
        ("torch-2.11-cxx98-cpu-cpython-3.9-abi3-x86_64-linux", CPU311, "built for the other C++ ABI"),
        ("torch-2.11-cpu-cpython-3.9-abi3-x86_64-linux", replace(CPU311, cxx11=False), None),  # untagged: either
    ],
)
def test_python_and_framework_rules_of_the_0_19_names(name, system, reason):
    assert why_not(parse_variant(name), system) == reason


def test_preference_is_kernels_0_19s():
    """Hugging Face's own example run (torch 2.11 cxx11, CUDA 13.0, tvm-ffi 0.1): the same order,
    names that tie (one build under both forms) by name."""
    system = SystemInfo((2, 11), "cuda", (13, 0), "x86_64", "linux", python=(3, 11), tvm_ffi=(0, 1))
    expected = [
        "torch-stable-abi-2.10-cuda-13.0-cpython-3.10-abi3-x86_64-linux", "torch-stable-abi210-cu130-x86_64-linux",
        "torch-stable-abi29-cu130-x86_64-linux",
        "torch-2.11-cuda-13.0-cpython-3.9-abi3-x86_64-linux", "torch211-cu130-x86_64-linux",
        "torch-2.11-cxx11-cuda-13.0-cpython-3.9-abi3-x86_64-linux", "torch211-cxx11-cu130-x86_64-linux",
        "tvm-ffi-0.1-cuda-13.0-cpython-3.9-abi3-x86_64-linux", "tvm-ffi01-cu130-x86_64-linux",
        "sdk-cuda-13.0-cpython-3.10-abi3-x86_64-linux", "sdk-cpython-3.10-abi3-x86_64-linux",
        "torch-cuda", "torch-universal", "sdk-cuda", "sdk",
    ]
    rejected = ["torch211-cxx11-cu131-x86_64-linux", "torch211-cxx11-cu128-x86_64-linux",
                "torch-stable-abi212-cu130-x86_64-linux", "torch-2.11-cuda-13.0-cpython-3.12-abi3-x86_64-linux",
                "torch-2.11-cuda-13.0-cpython-3.15-abi3t-x86_64-linux"]
    trace = resolve(list(reversed(expected)) + rejected, system)
    assert [c.name for c in trace if c.accepted] == expected
    assert {c.name for c in trace if not c.accepted} == set(rejected)
