"""Variant names (docs/formats.md, "Variant names"): format, parse, and judge which fit a system.

The one owner of variant names: the builder names its outputs with it, the publisher checks
them with it and the loaders choose with it, so all three always agree.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import platform
import re
import sys
import sysconfig
from dataclasses import dataclass, replace

from packaging.version import InvalidVersion, Version

from . import gpu_arch as arch_rules
from . import host_abi
from .errors import InvalidRequest, TorchMissing

BACKENDS = ("cpu", "cuda", "metal", "rocm", "xpu", "neuron", "tpu", "cann")

# Variant kinds. COMPILED, STABLE_ABI and TVM_FFI are "arch" variants (compiled code for one
# CPU, OS and Python ABI); SDK variants carry no framework; NOARCH and UNIVERSAL are Python only.
COMPILED, STABLE_ABI, TVM_FFI, SDK = "compiled", "stable-abi", "tvm-ffi", "sdk"
NOARCH, UNIVERSAL = "noarch", "universal"
ARCH_KINDS = (COMPILED, STABLE_ABI, TVM_FFI)

# A legacy name (no `cpython-` part) stands for CPython 3.9 and later with the limited API
# (abi3), as kernels 0.19 reads it; `abi3t` (free-threaded stable ABI, PEP 803) exists from 3.15.
LEGACY_PYTHON = (3, 9)
PYTHON_ABIS = ("abi3", "abi3t")
ABI3T_MIN_PYTHON = (3, 15)

METAL_MIN_MACOS = (26, 0)

_CPUS = ("x86_64", "aarch64")
_OSES = ("linux", "darwin", "windows")
# Versioned backends: the legacy tag's prefix (cu130) and the new form's name (cuda-13.0).
_VERSIONED = {"cuda": "cu", "rocm": "rocm", "xpu": "xpu", "cann": "cann"}
_UNVERSIONED = ("cpu", "metal", "neuron", "tpu")
# A legacy tag's version digits: the last one is the minor, except ROCm 7.14 (`rocm714`), as
# kernels 0.19 reads them.
_LEGACY_COMPUTE_RE = re.compile(r"(?P<prefix>cu|rocm|xpu|cann)(?P<maj>7(?=14$)|\d+)(?P<min>\d+)")
_DOTTED_RE = re.compile(r"(\d+)\.(\d+)")


@dataclass(frozen=True)
class Variant:
    """One build configuration. `torch` is the torch version for compiled variants, the minimum
    torch (the ABI) for stable-ABI ones and the tvm-ffi version for tvm-ffi ones;
    `compute_version` is the CUDA, ROCm, XPU or CANN version, None for the others. `python` is the
    minimum CPython of a name in the 0.19 form (`cpython-3.10-abi3`), None for a legacy name (which
    means 3.9, abi3) and for variants without compiled code. `cxx11` None: a name without a C++ ABI
    tag. `framework` tells `torch-metal` from `mlx-metal`."""

    kind: str
    backend: str
    torch: tuple[int, int] | None = None
    compute_version: tuple[int, int] | None = None
    cpu: str | None = None
    os: str | None = None
    cxx11: bool | None = True
    python: tuple[int, int] | None = None
    python_abi: str = "abi3"
    framework: str = "torch"

    @property
    def compute(self) -> str:
        """The legacy compute tag: cu130, rocm63, xpu20251, metal, cpu."""
        return format_compute(self.backend, self.compute_version)

    @property
    def legacy(self) -> bool:
        """Named in the legacy form, which every `kernels` release reads (0.17 and 0.18 misread the
        0.19 form)."""
        return self.kind in ARCH_KINDS and self.python is None

    @property
    def min_python(self) -> tuple[int, int] | None:
        """The oldest CPython its compiled code imports into; None: no compiled code."""
        if self.kind in ARCH_KINDS:
            return self.python or LEGACY_PYTHON
        return self.python

    @property
    def name(self) -> str:
        if self.kind == UNIVERSAL:
            return "torch-universal"
        if self.kind == NOARCH:
            return f"{self.framework}-{self.backend}"
        if self.kind == SDK:
            parts = ["sdk"]
            if self.python is None:
                parts += [self.backend] if self.backend else []
            else:
                parts += [_new_compute(self.backend, self.compute_version)] if self.backend else []
                parts += [self._python_part(), f"{self.cpu}-{self.os}"]
            return "-".join(parts)
        maj, mnr = self.torch
        if self.legacy:
            framework = {STABLE_ABI: f"torch-stable-abi{maj}{mnr}", TVM_FFI: f"tvm-ffi{maj}{mnr}"}.get(
                self.kind, f"torch{maj}{mnr}")
            if self.kind == COMPILED and self.os == "linux" and self.cxx11 is not None:
                framework += "-cxx11" if self.cxx11 else "-cxx98"
            return f"{framework}-{self.compute}-{self.cpu}-{self.os}"
        framework = {STABLE_ABI: f"torch-stable-abi-{maj}.{mnr}", TVM_FFI: f"tvm-ffi-{maj}.{mnr}"}.get(
            self.kind, f"torch-{maj}.{mnr}")
        if self.kind == COMPILED and self.cxx11 is not None:
            framework += "-cxx11" if self.cxx11 else "-cxx98"
        return f"{framework}-{_new_compute(self.backend, self.compute_version)}-{self._python_part()}-{self.cpu}-{self.os}"

    def _python_part(self) -> str:
        return f"cpython-{self.python[0]}.{self.python[1]}-{self.python_abi}"

    def __str__(self) -> str:
        return self.name


def format_compute(backend: str, version: tuple[int, int] | None) -> str:
    if backend in _VERSIONED:
        return f"{_VERSIONED[backend]}{version[0]}{version[1]}"
    return backend


def _new_compute(backend: str, version: tuple[int, int] | None) -> str:
    """The compute part of a 0.19-form name: cuda-13.0, rocm-7.2, xpu-2025.3, cpu."""
    return f"{backend}-{version[0]}.{version[1]}" if backend in _VERSIONED else backend


def parse_compute(tag: str) -> tuple[str, tuple[int, int] | None]:
    """`cu130` -> ("cuda", (13, 0)); `rocm63` -> ("rocm", (6, 3)); `xpu20251` -> ("xpu", (2025, 1))."""
    if tag in _UNVERSIONED:
        return tag, None
    m = _LEGACY_COMPUTE_RE.fullmatch(tag)
    if not m:
        raise ValueError(f"unknown compute tag {tag!r} (expected cuXY, rocmXY, xpuYYYYN, cannXY, metal or cpu)")
    backend = {prefix: name for name, prefix in _VERSIONED.items()}[m["prefix"]]
    return backend, (int(m["maj"]), int(m["min"]))


def _parse_new_compute(parts: list[str]) -> tuple[str, tuple[int, int] | None]:
    """["cuda", "13.0"] -> ("cuda", (13, 0)); ["cpu"] -> ("cpu", None)."""
    if len(parts) == 1 and parts[0] in _UNVERSIONED:
        return parts[0], None
    if len(parts) == 2 and parts[0] in _VERSIONED and (m := _DOTTED_RE.fullmatch(parts[1])):
        return parts[0], (int(m[1]), int(m[2]))
    raise ValueError(f"unknown backend {'-'.join(parts)!r} (expected cuda-X.Y, rocm-X.Y, xpu-YYYY.N, cann-X.Y, "
                     f"{', '.join(_UNVERSIONED)})")


def _parse_python(parts: list[str]) -> tuple[tuple[int, int], str]:
    """["cpython", "3.10", "abi3"] -> ((3, 10), "abi3")."""
    m = _DOTTED_RE.fullmatch(parts[1]) if len(parts) == 3 and parts[0] == "cpython" else None
    if m is None or parts[2] not in PYTHON_ABIS:
        raise ValueError(f"bad Python part {'-'.join(parts)!r} (expected cpython-3.N-abi3 or cpython-3.N-abi3t)")
    version = (int(m[1]), int(m[2]))
    if parts[2] == "abi3t" and version < ABI3T_MIN_PYTHON:
        raise ValueError(f"abi3t needs Python {ABI3T_MIN_PYTHON[0]}.{ABI3T_MIN_PYTHON[1]} or later, not "
                         f"{version[0]}.{version[1]}")
    return version, parts[2]


def _split_system(parts: list[str]) -> tuple[list[str], str, str]:
    if len(parts) < 3 or parts[-2] not in _CPUS or parts[-1] not in _OSES:
        raise ValueError(f"no <cpu>-<os> at the end (cpu: {', '.join(_CPUS)}; os: {', '.join(_OSES)})")
    return parts[:-2], parts[-2], parts[-1]


def _framework(parts: list[str]) -> tuple[str, tuple[int, int], bool, bool | None, int]:
    """The framework at the start of an arch name's parts: (kind, version, legacy, cxx11, parts
    used). The forms kernels 0.19 reads: torch211[-cxx11], torch-2.11[-cxx11],
    torch-stable-abi210, torch-stable-abi-2.10, tvm-ffi01, tvm-ffi-0.1."""
    def tag(i: int) -> bool | None:
        return {"cxx11": True, "cxx98": False}.get(parts[i]) if len(parts) > i else None

    def dotted(i: int) -> tuple[int, int]:
        m = _DOTTED_RE.fullmatch(parts[i]) if len(parts) > i else None
        if m is None:
            raise ValueError("no MAJOR.MINOR version after the framework")
        return int(m[1]), int(m[2])

    if parts[:2] == ["torch", "stable"]:
        if len(parts) > 3 and parts[2] == "abi":
            return STABLE_ABI, dotted(3), False, None, 4
        m = re.fullmatch(r"abi(\d)(\d+)", parts[2]) if len(parts) > 2 else None
        if m is None:
            raise ValueError("no ABI version after torch-stable-abi")
        return STABLE_ABI, (int(m[1]), int(m[2])), True, None, 3
    if parts[0] == "torch" and len(parts) > 1 and parts[1][:1].isdigit():
        cxx11 = tag(2)
        return COMPILED, dotted(1), False, cxx11, 2 if cxx11 is None else 3
    if m := re.fullmatch(r"torch(\d)(\d+)", parts[0]):
        cxx11 = tag(1)
        return COMPILED, (int(m[1]), int(m[2])), True, cxx11, 1 if cxx11 is None else 2
    if parts[0] == "tvm" and len(parts) > 1:
        if parts[1] == "ffi":
            return TVM_FFI, dotted(2), False, None, 3
        # the major is the shortest digit run (tvm-ffi01 is 0.1), as kernels 0.19 reads it
        if m := re.fullmatch(r"ffi(\d+?)(\d+)", parts[1]):
            return TVM_FFI, (int(m[1]), int(m[2])), True, None, 2
    raise ValueError("unknown framework (expected torchXY, torch-X.Y, torch-stable-abi, tvm-ffi or sdk)")


def _parse_arch(name: str, parts: list[str]) -> Variant:
    kind, version, legacy, cxx11, used = _framework(parts)
    rest, cpu, os = _split_system(parts[used:])
    python, abi = None, "abi3"
    if legacy:
        backend, compute = parse_compute("-".join(rest)) if len(rest) == 1 else _bad_backend(rest)
    else:
        if "cpython" not in rest:
            raise ValueError("no cpython-3.N-abi3 part (a name in the 0.19 form has one)")
        i = rest.index("cpython")
        python, abi = _parse_python(rest[i:])
        backend, compute = _parse_new_compute(rest[:i])
    if cxx11 is not None and os != "linux":
        # the C++ ABI tag is Linux's: no loader takes one elsewhere, and a legacy macOS name
        # without one must round-trip
        raise ValueError(f"a {os} variant has no C++ ABI tag")
    if cxx11 is None and (kind != COMPILED or (legacy and os != "linux")):
        # only a compiled Linux name says its C++ ABI; the others are what kbuild builds (C++11)
        cxx11 = True
    return Variant(kind, backend, version, compute, cpu, os, cxx11, python, abi)


def _bad_backend(rest: list[str]):
    raise ValueError(f"unknown compute tag {'-'.join(rest)!r}")


def _parse_sdk(parts: list[str]) -> Variant:
    """sdk, sdk-<backend>, sdk-cpython-3.N-<abi>-<cpu>-<os>, sdk-<backend>[-X.Y]-cpython-...: SDK
    variants (kernels 0.19), with no framework."""
    rest = parts[1:]
    if "cpython" in rest:
        rest, cpu, os = _split_system(rest)
        i = rest.index("cpython")
        python, abi = _parse_python(rest[i:])
        backend, compute = _parse_new_compute(rest[:i]) if i else ("", None)
        return Variant(SDK, backend, None, compute, cpu, os, True, python, abi, framework="")
    if len(rest) > 1 or (rest and rest[0] not in BACKENDS):
        raise ValueError(f"unknown SDK backend {'-'.join(rest)!r} (expected one of {', '.join(BACKENDS)})")
    return Variant(SDK, rest[0] if rest else "", framework="")


def parse_variant(name: str) -> Variant:
    """Parse any variant name (docs/formats.md, "Variant names"): the legacy forms and kernels
    0.19's; ValueError names what was not understood."""
    if name == "torch-universal":
        return Variant(UNIVERSAL, backend="")
    parts = name.split("-")
    if len(parts) == 2 and parts[0] in ("torch", "mlx") and parts[1] in BACKENDS:
        return Variant(NOARCH, backend=parts[1], framework=parts[0])
    try:
        if parts[0] == "sdk":
            return _parse_sdk(parts)
        return _parse_arch(name, parts)
    except ValueError as e:
        raise ValueError(
            f"not a variant name: {name!r}: {e} (expected e.g. torch214-cxx11-cu130-x86_64-linux, "
            "torch-stable-abi210-cu130-x86_64-linux, torch-2.11-cuda-13.0-cpython-3.9-abi3-x86_64-linux, "
            "torch-cuda or torch-universal)"
        ) from None


@dataclass(frozen=True)
class SystemInfo:
    """What a variant must fit: the running (or target) torch and machine."""

    torch: tuple[int, int]
    backend: str
    compute_version: tuple[int, int] | None
    cpu: str
    os: str
    cxx11: bool = True
    # this host's glibc and loaded libstdc++ (GLIBCXX) versions, checked against a variant's
    # recorded ABI floor before it is loaded; None: unknown, not checked
    glibc: tuple[int, ...] | None = None
    glibcxx: tuple[int, ...] | None = None
    # False when torch was built for a GPU backend but sees no device (a CUDA torch on a machine
    # without a GPU): CPU variants fit too, and come first, since a GPU build cannot run here
    device_visible: bool = True
    # the GPU's arch, checked against the archs a variant's metadata records: a CUDA compute
    # capability ("9.0") or a ROCm arch ("gfx942"); None: no device, or not checked
    gpu_arch: str | None = None
    # a free-threaded (no-GIL) Python, which cannot import the .abi3.so of compiled variants
    free_threaded: bool = False
    # False when judging for another machine (a hub page's "which variant loads there"): this
    # Python's installed packages say nothing about a variant's python-depends there
    python_env: bool = True
    # the running CPython (major, minor): a 0.19-form name's `cpython-3.N` is a minimum
    python: tuple[int, int] = tuple(sys.version_info[:2])
    # the installed tvm-ffi's (major, minor), which a tvm-ffi variant must equal; None: none
    tvm_ffi: tuple[int, int] | None = None
    # whether MLX is installed, which an `mlx-<backend>` variant needs
    mlx: bool = False
    # macOS's (major, minor) on macOS: compiled Metal code needs 26+; None: not macOS, or not checked
    macos: tuple[int, int] | None = None

    def compiled_variant(self) -> Variant:
        """The name a compiled build for exactly this system gets."""
        return Variant(COMPILED, self.backend, self.torch, self.compute_version, self.cpu, self.os, self.cxx11)

    def fitting_build(self) -> Variant:
        """The compiled build that would run on this machine, for a publisher to make: this
        system's own name, or its CPU build where torch was built for a GPU it cannot see (a GPU
        build could not run here, a CPU one would)."""
        return (self.as_cpu() if self.cpu_first else self).compiled_variant()

    def describe(self) -> str:
        compute = format_compute(self.backend, self.compute_version)
        if not self.device_visible:
            compute += f" with no visible {_DEVICE.get(self.backend, self.backend)} device (CPU variants first)"
        elif self.gpu_arch:
            compute += f" on {arch_rules.describe_device(self.backend, self.gpu_arch)}"
        python = ", free-threaded Python" if self.free_threaded else ""
        return f"torch {self.torch[0]}.{self.torch[1]}, {compute}, {self.cpu}-{self.os}{python}"

    @property
    def cpu_first(self) -> bool:
        return not self.device_visible and self.backend != "cpu"

    def as_cpu(self) -> SystemInfo:
        return replace(self, backend="cpu", compute_version=None, device_visible=True, gpu_arch=None)


def host_cpu() -> str:
    machine = platform.machine().lower()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)


def host_os() -> str:
    return {"linux": "linux", "darwin": "darwin", "win32": "windows"}.get(sys.platform, sys.platform)


def detect_system(backend: str | None = None) -> SystemInfo:
    """Describe the running torch. `backend="cpu"` asks for CPU builds in a CUDA-built torch.
    The GPU's arch is torch's current device's, or `KBUILD_GPU_ARCH` (for tests, and to judge
    for another machine: a device of that arch is then taken to be there)."""
    try:
        import torch  # deferred: importing kbuild must not import torch
    except ModuleNotFoundError as e:
        if e.name != "torch":
            raise
        raise TorchMissing(f"kbuild loads kernels into torch, and this Python ({sys.executable}) has no "
                                  "torch: install it (pip install torch)", name="torch") from None

    from .settings import gpu_arch_override

    version = tuple(int(p) for p in re.match(r"(\d+)\.(\d+)", torch.__version__).groups())
    cxx11 = bool(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", True))
    native, compute = _native_backend(torch)
    visible = True
    if backend is None:
        backend = native
        visible = _device_visible(torch, native)
    elif backend not in BACKENDS:
        raise InvalidRequest(f"unknown backend {backend!r} (known: {', '.join(BACKENDS)})")
    elif backend not in ("cpu", native):
        raise InvalidRequest(f"backend {backend!r} is not available in this torch ({torch.__version__}, {native})")
    if backend != native:
        compute = None
    device = None
    if backend in arch_rules.CHECKED:
        override = gpu_arch_override()
        if override is not None:
            device, visible = arch_rules.parse_device(backend, override, "KBUILD_GPU_ARCH"), True
        elif visible:
            device = arch_rules.probe(torch, backend)
    return SystemInfo(version, backend, compute, host_cpu(), host_os(), cxx11, host_abi.glibc(), host_abi.libstdcxx(),
                      device_visible=visible, gpu_arch=device, free_threaded=free_threaded_python(),
                      tvm_ffi=_tvm_ffi_version(), mlx=importlib.util.find_spec("mlx") is not None, macos=_macos())


def _tvm_ffi_version() -> tuple[int, int] | None:
    """The installed tvm-ffi's major.minor, from its distribution (importing it would load its
    library for every get_kernel)."""
    try:
        release = Version(importlib.metadata.version("apache-tvm-ffi")).release
    except (importlib.metadata.PackageNotFoundError, InvalidVersion):
        return None
    return (release + (0,))[0], (release + (0, 0))[1]


def _macos() -> tuple[int, int] | None:
    release = platform.mac_ver()[0] if sys.platform == "darwin" else ""
    parts = [int(p) for p in re.findall(r"\d+", release)[:2]]
    return (parts[0], (parts + [0])[1]) if parts else None


def free_threaded_python() -> bool:
    """Whether this interpreter runs without the GIL (python3.13t and later)."""
    return bool(sysconfig.get_config_var("Py_GIL_DISABLED"))


_DEVICE = {"cuda": "CUDA", "rocm": "ROCm", "xpu": "XPU", "metal": "Metal"}


def _device_visible(torch, backend: str) -> bool:
    """Whether the GPU backend torch was built for has a device here (ROCm answers through
    torch.cuda too). Asks the driver for a count; no CUDA context is created."""
    if backend in ("cuda", "rocm"):
        return bool(torch.cuda.is_available())
    return True


def _native_backend(torch) -> tuple[str, tuple[int, int] | None]:
    def two(v: str) -> tuple[int, int]:
        parts = [int(p) for p in re.findall(r"\d+", v)[:2]]
        return (parts + [0])[0], (parts + [0, 0])[1]

    if torch.version.cuda:
        return "cuda", two(torch.version.cuda)
    if getattr(torch.version, "hip", None):
        return "rocm", two(torch.version.hip)
    if getattr(torch.version, "xpu", None):
        # torch.version.xpu is a oneAPI date like "20250101": year, then the minor at index 5
        # (the split Hugging Face's loader uses), so xpu20251.
        v = torch.version.xpu
        return "xpu", (int(v[0:4]), int(v[5:6]))
    if sys.platform == "darwin" and torch.backends.mps.is_built():
        return "metal", None
    return "cpu", None


def why_not(variant: Variant, system: SystemInfo) -> str | None:
    """None when `variant` can run on `system`, else a short reason it cannot. Accepts and
    rejects as kernels 0.19 does (its `_check_variants`), the reasons in kbuild's words."""
    if variant.kind == UNIVERSAL:
        return None
    if variant.backend == "cpu" and system.cpu_first:
        return why_not(variant, system.as_cpu())
    if variant.backend and variant.backend != system.backend:  # an SDK's "" is any backend
        return f"built for {variant.backend}, this system uses {system.backend}"
    if variant.kind == NOARCH:
        if variant.framework == "mlx" and not system.mlx:
            return "an MLX kernel, and MLX is not installed"
        return None
    if reason := _python_mismatch(variant, system):
        return reason
    if variant.cpu is not None and (variant.cpu, variant.os) != (system.cpu, system.os):
        return f"built for {variant.cpu}-{variant.os}, this is {system.cpu}-{system.os}"
    if variant.kind == STABLE_ABI and system.torch < variant.torch:
        return f"needs torch >= {variant.torch[0]}.{variant.torch[1]}, this is torch {system.torch[0]}.{system.torch[1]}"
    if variant.kind == TVM_FFI and variant.torch != system.tvm_ffi:
        have = f"tvm-ffi {system.tvm_ffi[0]}.{system.tvm_ffi[1]}" if system.tvm_ffi else "no tvm-ffi installed"
        return f"built for tvm-ffi {variant.torch[0]}.{variant.torch[1]}, this has {have}"
    if variant.kind == COMPILED:
        if variant.torch != system.torch:
            return f"built for torch {variant.torch[0]}.{variant.torch[1]}, this is torch {system.torch[0]}.{system.torch[1]}"
        # an untagged name fits either ABI (kernels 0.19's rule)
        if variant.os == "linux" and variant.cxx11 is not None and variant.cxx11 != system.cxx11:
            return "built for the other C++ ABI"
    if variant.backend == "metal" and variant.cpu is not None and system.macos is not None and system.macos < METAL_MIN_MACOS:
        # compiled with -std=metal4.0, which older macOS cannot load (kernels 0.19 refuses it too)
        return f"compiled Metal code needs macOS {METAL_MIN_MACOS[0]} or later, this is macOS {system.macos[0]}.{system.macos[1]}"
    return _compute_mismatch(variant, system)


def _python_mismatch(variant: Variant, system: SystemInfo) -> str | None:
    """Why this interpreter cannot import the variant's compiled code: `abi3` libraries need a
    Python with the GIL, and `cpython-3.N` is the oldest CPython they import into."""
    minimum = variant.min_python
    if minimum is None:
        return None
    if variant.python_abi == "abi3" and system.free_threaded:
        # built for the limited API (.abi3.so), which a free-threaded Python does not import: the
        # import would fail with "No module named", or worse
        return ("a compiled (.abi3.so) build, which a free-threaded Python cannot import; use a Python with the GIL "
                "(or an abi3t build, Python 3.15+)")
    if system.python < minimum:
        return f"needs Python >= {minimum[0]}.{minimum[1]}, this is Python {system.python[0]}.{system.python[1]}"
    return None


def _compute_mismatch(variant: Variant, system: SystemInfo) -> str | None:
    built, runtime = variant.compute_version, system.compute_version
    if built is None:
        return None
    if runtime is None:
        return f"built for {variant.compute}, this torch has no {variant.backend} version"
    if variant.backend in ("cuda", "rocm"):
        # the same major and a minor at most the runtime's (ROCm too, since kernels 0.18)
        if built[0] != runtime[0] or runtime[1] < built[1]:
            label = {"cuda": "CUDA", "rocm": "ROCm"}[variant.backend]
            return (f"built for {label} {built[0]}.{built[1]}, this torch uses {label} {runtime[0]}.{runtime[1]}")
        return None
    if built != runtime:
        return f"built for {variant.compute}, this torch uses {format_compute(variant.backend, runtime)}"
    return None


@dataclass(frozen=True)
class Candidate:
    """One entry of a resolution trace: a name, its parse, and why it was rejected (or None)."""

    name: str
    variant: Variant | None
    reason: str | None
    note: str | None = None  # why a fitting variant is ranked where it is

    @property
    def accepted(self) -> bool:
        return self.reason is None


def resolve(names: list[str], system: SystemInfo) -> list[Candidate]:
    """Every name judged against `system`: accepted ones best-first, then the rejected ones."""
    candidates = []
    for name in names:
        try:
            variant = parse_variant(name)
        except ValueError:
            candidates.append(Candidate(name, None, "not a variant name"))
            continue
        reason = why_not(variant, system)
        note = None
        if reason is None and system.cpu_first and variant.backend == system.backend:
            note = f"after CPU variants: no {_DEVICE.get(system.backend, system.backend)} device is visible"
        candidates.append(Candidate(name, variant, reason, note))
    cpu_first = system.cpu_first
    accepted = sorted((c for c in candidates if c.accepted),
                      key=lambda c: (not (cpu_first and c.variant.backend == "cpu"), preference(c.variant), c.name))
    rejected = sorted((c for c in candidates if not c.accepted), key=lambda c: c.name)
    return accepted + rejected


def reject(trace: list[Candidate], name: str, reason: str) -> list[Candidate]:
    """The trace with candidate `name` rejected for `reason` (found out after resolve, e.g. from
    its metadata): the accepted ones keep their order, the rejected ones stay sorted by name."""
    accepted = [c for c in trace if c.accepted and c.name != name]
    rejected = [Candidate(c.name, c.variant, reason if c.name == name else c.reason, c.note) for c in trace
                if not c.accepted or c.name == name]
    return accepted + sorted(rejected, key=lambda c: c.name)


def annotate(trace: list[Candidate], name: str, note: str) -> list[Candidate]:
    """The trace with `note` added to candidate `name` (what a check of its metadata found)."""
    return [replace(c, note="; ".join(filter(None, (c.note, note)))) if c.name == name else c for c in trace]


def choose(names: list[str], system: SystemInfo) -> Candidate | None:
    """The best variant for `system`, or None when nothing fits."""
    best = resolve(names, system)
    return best[0] if best and best[0].accepted else None


def preference(variant: Variant) -> tuple:
    """The sort key of a fitting variant, lower first: kernels 0.19's `_sort_variants`, so both
    loaders take the same variant from the same names. Stable ABI (newest ABI first), then
    compiled (a name without a C++ ABI tag before a tagged one), tvm-ffi, SDK builds with compiled
    code, Python-only `torch-<backend>`, `torch-universal`, `sdk-<backend>`, `sdk`; within a kind
    the highest compatible CUDA/ROCm minor, then abi3 before abi3t and the newest minimum Python.
    Names that tie (one build under both name forms) are taken by name."""
    minor = -variant.compute_version[1] if variant.compute_version else 0
    python = variant.min_python
    python_order = (PYTHON_ABIS.index(variant.python_abi), -python[0], -python[1]) if python else (0, 0, 0)
    if variant.kind == STABLE_ABI:
        return (0, -variant.torch[0], -variant.torch[1], minor, *python_order)
    if variant.kind == COMPILED:
        return (1, 0, 0 if variant.cxx11 is None or variant.os != "linux" else 1, minor, *python_order)
    if variant.kind == TVM_FFI:
        return (2, 0, 0, minor, *python_order)
    if variant.kind == SDK and python is not None:
        return (3, 0, 0, minor if variant.backend else 1, *python_order)
    if variant.kind in (NOARCH, UNIVERSAL):
        return (4, 0, 0, 1 if variant.kind == UNIVERSAL else 0, 0, 0, 0)
    return (5 if variant.backend else 6, 0, 0, 0, 0, 0, 0)


def format_trace(candidates: list[Candidate]) -> str:
    """The resolution trace, one line per candidate, as shown in errors and by the CLI."""
    lines = []
    for c in candidates:
        fits = f"fits ({c.note})" if c.note else "fits"
        lines.append(f"  {c.name}: " + (fits if c.accepted else f"rejected ({c.reason})"))
    return "\n".join(lines)
