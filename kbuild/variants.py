"""Variant names (docs/formats.md, "Variant names") and the system a variant must fit.

The one owner of variant names: the builder names its outputs with it, the publisher checks
them with it and the loaders choose with it, so all three always agree. A name is made of small
typed parts (the framework: Torch, TorchStableAbi, TvmFfi, Noarch, Universal, Sdk; the Compute
backend and version; the Python ABI; the Platform), each printing its own piece; `parse_variant`
reads a name once into them. Whether a variant fits a system is kbuild.fit's; which of several a
loader takes, kbuild.choice's.
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
from .errors import InvalidRequest, KernelError, TorchMissing
from .settings import gpu_arch_override

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

_CPUS = ("x86_64", "aarch64")
_OSES = ("linux", "darwin", "windows")
# Versioned backends: the legacy tag's prefix (cu130) and the new form's name (cuda-13.0).
_VERSIONED = {"cuda": "cu", "rocm": "rocm", "xpu": "xpu", "cann": "cann"}
_UNVERSIONED = ("cpu", "metal", "neuron", "tpu")
# A legacy tag's version digits: the last one is the minor, except ROCm 7.14 (`rocm714`), as
# kernels 0.19 reads them.
_LEGACY_COMPUTE_RE = re.compile(r"(?P<prefix>cu|rocm|xpu|cann)(?P<maj>7(?=14$)|\d+)(?P<min>\d+)")
_DOTTED_RE = re.compile(r"(\d+)\.(\d+)")


# -- the parts of a name: each parses and prints itself -------------------------------------------

@dataclass(frozen=True)
class _Versioned:
    """A framework named with its (major, minor): `<prefix>XY` in a legacy name, `<prefix>-X.Y` in
    the 0.19 form."""

    version: tuple[int, int]
    prefix = ""

    def part(self, legacy: bool) -> str:
        maj, mnr = self.version
        return f"{self.prefix}{maj}{mnr}" if legacy else f"{self.prefix}-{maj}.{mnr}"


@dataclass(frozen=True)
class Torch(_Versioned):
    """Compiled against one torch release's C++ API. `cxx11` None: a name without the C++ ABI tag,
    which fits either ABI (the tag is Linux's: a name elsewhere never has one)."""

    cxx11: bool | None = None
    kind, prefix = COMPILED, "torch"

    def part(self, legacy: bool) -> str:
        base = super().part(legacy)
        return base if self.cxx11 is None else f"{base}-{'cxx11' if self.cxx11 else 'cxx98'}"


@dataclass(frozen=True)
class TorchStableAbi(_Versioned):
    """Compiled against torch's stable ABI of `version`: loads into that torch and every later one."""

    kind, prefix = STABLE_ABI, "torch-stable-abi"


@dataclass(frozen=True)
class TvmFfi(_Versioned):
    """Compiled against tvm-ffi `version`, which the installed tvm-ffi must equal."""

    kind, prefix = TVM_FFI, "tvm-ffi"


@dataclass(frozen=True)
class Noarch:
    """Python only, for one backend: `torch-cuda`, or MLX's `mlx-metal`."""

    framework: str = "torch"
    kind = NOARCH


@dataclass(frozen=True)
class Universal:
    """Python only, for any backend: `torch-universal`."""

    kind = UNIVERSAL


@dataclass(frozen=True)
class Sdk:
    """No framework (kernels 0.19): `sdk`, `sdk-<backend>`, or compiled code for one Python."""

    kind = SDK

    def part(self, legacy: bool) -> str:
        return "sdk"


@dataclass(frozen=True)
class Compute:
    """The backend a variant runs on and, for CUDA, ROCm, XPU and CANN, its version."""

    backend: str
    version: tuple[int, int] | None = None

    @property
    def tag(self) -> str:
        """The legacy compute tag: cu130, rocm63, xpu20251, metal, cpu."""
        return format_compute(self.backend, self.version)

    def part(self, legacy: bool) -> str:
        """The tag in a legacy name; in the 0.19 form cuda-13.0, rocm-7.2, xpu-2025.3, cpu."""
        if self.version is None:
            return self.backend
        return self.tag if legacy else f"{self.backend}-{self.version[0]}.{self.version[1]}"

    @classmethod
    def parse_tag(cls, tag: str) -> Compute:
        return cls(*parse_compute(tag))

    @classmethod
    def parse(cls, parts: list[str]) -> Compute:
        """["cuda", "13.0"] -> cuda 13.0; ["cpu"] -> cpu."""
        if len(parts) == 1 and parts[0] in _UNVERSIONED:
            return cls(parts[0])
        if len(parts) == 2 and parts[0] in _VERSIONED and (m := _DOTTED_RE.fullmatch(parts[1])):
            return cls(parts[0], (int(m[1]), int(m[2])))
        raise ValueError(f"unknown backend {'-'.join(parts)!r} (expected cuda-X.Y, rocm-X.Y, xpu-YYYY.N, cann-X.Y, "
                         f"{', '.join(_UNVERSIONED)})")


@dataclass(frozen=True)
class Python:
    """`cpython-3.10-abi3` in a 0.19-form name: the oldest CPython its compiled code imports into,
    through the stable ABI `abi` (abi3, or the free-threaded abi3t)."""

    version: tuple[int, int]
    abi: str = "abi3"

    def __str__(self) -> str:
        return f"cpython-{self.version[0]}.{self.version[1]}-{self.abi}"

    @classmethod
    def parse(cls, parts: list[str]) -> Python:
        m = _DOTTED_RE.fullmatch(parts[1]) if len(parts) == 3 and parts[0] == "cpython" else None
        if m is None or parts[2] not in PYTHON_ABIS:
            raise ValueError(f"bad Python part {'-'.join(parts)!r} (expected cpython-3.N-abi3 or cpython-3.N-abi3t)")
        version = (int(m[1]), int(m[2]))
        if parts[2] == "abi3t" and version < ABI3T_MIN_PYTHON:
            raise ValueError(f"abi3t needs Python {ABI3T_MIN_PYTHON[0]}.{ABI3T_MIN_PYTHON[1]} or later, not "
                             f"{version[0]}.{version[1]}")
        return cls(version, parts[2])


@dataclass(frozen=True)
class Platform:
    """The CPU and OS compiled code runs on: x86_64-linux."""

    cpu: str
    os: str

    def __str__(self) -> str:
        return f"{self.cpu}-{self.os}"

    @classmethod
    def host(cls) -> Platform:
        return cls(host_cpu(), host_os())

    @classmethod
    def split_off(cls, parts: list[str]) -> tuple[list[str], Platform]:
        """The parts before the `<cpu>-<os>` that ends a name, and that platform."""
        if len(parts) < 3 or parts[-2] not in _CPUS or parts[-1] not in _OSES:
            raise ValueError(f"no <cpu>-<os> at the end (cpu: {', '.join(_CPUS)}; os: {', '.join(_OSES)})")
        return parts[:-2], cls(parts[-2], parts[-1])


Framework = Torch | TorchStableAbi | TvmFfi | Noarch | Universal | Sdk


@dataclass(frozen=True)
class Variant:
    """One build configuration, made of its name's parts. A compiled name without `python` is in
    the legacy form (which means CPython 3.9 and later, abi3); `platform` is None for Python-only
    builds and plain `sdk[-<backend>]`; `compute` None for `torch-universal` and plain `sdk`."""

    framework: Framework
    compute: Compute | None = None
    python: Python | None = None
    platform: Platform | None = None

    def __post_init__(self):
        # the C++ ABI tag is Linux's: a build for another OS is named without one
        if isinstance(self.framework, Torch) and self.framework.cxx11 is not None and self.os not in (None, "linux"):
            object.__setattr__(self, "framework", replace(self.framework, cxx11=None))

    @property
    def name(self) -> str:
        if isinstance(self.framework, Universal):
            return "torch-universal"
        if isinstance(self.framework, Noarch):
            return f"{self.framework.framework}-{self.backend}"
        legacy = self.python is None
        parts = [self.framework.part(legacy), self.compute and self.compute.part(legacy), self.python, self.platform]
        return "-".join(str(p) for p in parts if p)

    def __str__(self) -> str:
        return self.name

    # -- what callers read of it -----------------------------------------------------------------

    @property
    def kind(self) -> str:
        return self.framework.kind

    @property
    def backend(self) -> str:
        """cuda, cpu, ...; "" for `torch-universal` and plain `sdk` (any backend)."""
        return self.compute.backend if self.compute else ""

    @property
    def compute_version(self) -> tuple[int, int] | None:
        return self.compute.version if self.compute else None

    @property
    def torch(self) -> tuple[int, int] | None:
        """The torch version of a compiled build, the minimum torch of a stable-ABI one, the
        tvm-ffi version of a tvm-ffi one; None for the others."""
        return self.framework.version if isinstance(self.framework, _Versioned) else None

    @property
    def cxx11(self) -> bool | None:
        """A compiled build's C++ ABI (None: its name does not say); True for the others."""
        return self.framework.cxx11 if isinstance(self.framework, Torch) else True

    @property
    def cpu(self) -> str | None:
        return self.platform.cpu if self.platform else None

    @property
    def os(self) -> str | None:
        return self.platform.os if self.platform else None

    @property
    def python_abi(self) -> str:
        return self.python.abi if self.python else "abi3"

    @property
    def legacy(self) -> bool:
        """Named in the legacy form, which every `kernels` release reads (0.17 and 0.18 misread the
        0.19 form)."""
        return self.kind in ARCH_KINDS and self.python is None

    @property
    def min_python(self) -> tuple[int, int] | None:
        """The oldest CPython its compiled code imports into; None: no compiled code."""
        if self.python is not None:
            return self.python.version
        return LEGACY_PYTHON if self.kind in ARCH_KINDS else None


def format_compute(backend: str, version: tuple[int, int] | None) -> str:
    if backend in _VERSIONED and version is not None:
        return f"{_VERSIONED[backend]}{version[0]}{version[1]}"
    return backend


def parse_compute(tag: str) -> tuple[str, tuple[int, int] | None]:
    """`cu130` -> ("cuda", (13, 0)); `rocm63` -> ("rocm", (6, 3)); `xpu20251` -> ("xpu", (2025, 1))."""
    if tag in _UNVERSIONED:
        return tag, None
    m = _LEGACY_COMPUTE_RE.fullmatch(tag)
    if not m:
        raise ValueError(f"unknown compute tag {tag!r} (expected cuXY, rocmXY, xpuYYYYN, cannXY, metal or cpu)")
    backend = {prefix: name for name, prefix in _VERSIONED.items()}[m["prefix"]]
    return backend, (int(m["maj"]), int(m["min"]))


# -- parsing a whole name --------------------------------------------------------------------------

def _framework(parts: list[str]) -> tuple[Torch | TorchStableAbi | TvmFfi, bool, int]:
    """The framework at the start of an arch name's parts: (framework, legacy, parts used). The
    forms kernels 0.19 reads: torch211[-cxx11], torch-2.11[-cxx11], torch-stable-abi210,
    torch-stable-abi-2.10, tvm-ffi01, tvm-ffi-0.1."""
    def tag(i: int) -> bool | None:
        return {"cxx11": True, "cxx98": False}.get(parts[i]) if len(parts) > i else None

    def dotted(i: int) -> tuple[int, int]:
        m = _DOTTED_RE.fullmatch(parts[i]) if len(parts) > i else None
        if m is None:
            raise ValueError("no MAJOR.MINOR version after the framework")
        return int(m[1]), int(m[2])

    if parts[:2] == ["torch", "stable"]:
        if len(parts) > 3 and parts[2] == "abi":
            return TorchStableAbi(dotted(3)), False, 4
        m = re.fullmatch(r"abi(\d)(\d+)", parts[2]) if len(parts) > 2 else None
        if m is None:
            raise ValueError("no ABI version after torch-stable-abi")
        return TorchStableAbi((int(m[1]), int(m[2]))), True, 3
    if parts[0] == "torch" and len(parts) > 1 and parts[1][:1].isdigit():
        cxx11 = tag(2)
        return Torch(dotted(1), cxx11), False, 2 if cxx11 is None else 3
    if m := re.fullmatch(r"torch(\d)(\d+)", parts[0]):
        cxx11 = tag(1)
        return Torch((int(m[1]), int(m[2])), cxx11), True, 1 if cxx11 is None else 2
    if parts[0] == "tvm" and len(parts) > 1:
        if parts[1] == "ffi":
            return TvmFfi(dotted(2)), False, 3
        # the major is the shortest digit run (tvm-ffi01 is 0.1), as kernels 0.19 reads it
        if m := re.fullmatch(r"ffi(\d+?)(\d+)", parts[1]):
            return TvmFfi((int(m[1]), int(m[2]))), True, 2
    raise ValueError("unknown framework (expected torchXY, torch-X.Y, torch-stable-abi, tvm-ffi or sdk)")


def _parse_arch(parts: list[str]) -> Variant:
    framework, legacy, used = _framework(parts)
    rest, platform = Platform.split_off(parts[used:])
    if legacy:
        if len(rest) != 1:
            raise ValueError(f"unknown compute tag {'-'.join(rest)!r}")
        compute, python = Compute.parse_tag(rest[0]), None
    else:
        if "cpython" not in rest:
            raise ValueError("no cpython-3.N-abi3 part (a name in the 0.19 form has one)")
        i = rest.index("cpython")
        compute, python = Compute.parse(rest[:i]), Python.parse(rest[i:])
    if isinstance(framework, Torch) and framework.cxx11 is not None and platform.os != "linux":
        # no loader takes a C++ ABI tag off Linux
        raise ValueError(f"a {platform.os} variant has no C++ ABI tag")
    return Variant(framework=framework, compute=compute, python=python, platform=platform)


def _parse_sdk(parts: list[str]) -> Variant:
    """sdk, sdk-<backend>, sdk-cpython-3.N-<abi>-<cpu>-<os>, sdk-<backend>[-X.Y]-cpython-...: SDK
    variants (kernels 0.19), with no framework."""
    rest = parts[1:]
    if "cpython" in rest:
        rest, platform = Platform.split_off(rest)
        i = rest.index("cpython")
        return Variant(framework=Sdk(), compute=Compute.parse(rest[:i]) if i else None,
                       python=Python.parse(rest[i:]), platform=platform)
    if len(rest) > 1 or (rest and rest[0] not in BACKENDS):
        raise ValueError(f"unknown SDK backend {'-'.join(rest)!r} (expected one of {', '.join(BACKENDS)})")
    return Variant(framework=Sdk(), compute=Compute(rest[0]) if rest else None)


def parse_variant(name: str) -> Variant:
    """Parse any variant name (docs/formats.md, "Variant names"): the legacy forms and kernels
    0.19's; ValueError names what was not understood."""
    if name == "torch-universal":
        return Variant(framework=Universal())
    parts = name.split("-")
    if len(parts) == 2 and parts[0] in ("torch", "mlx") and parts[1] in BACKENDS:
        return Variant(framework=Noarch(parts[0]), compute=Compute(parts[1]))
    try:
        if parts[0] == "sdk":
            return _parse_sdk(parts)
        return _parse_arch(parts)
    except ValueError as e:
        raise ValueError(
            f"not a variant name: {name!r}: {e} (expected e.g. torch214-cxx11-cu130-x86_64-linux, "
            "torch-stable-abi210-cu130-x86_64-linux, torch-2.11-cuda-13.0-cpython-3.9-abi3-x86_64-linux, "
            "torch-cuda or torch-universal)"
        ) from None


# -- the system a variant must fit -----------------------------------------------------------------

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
    python: tuple[int, int] = (sys.version_info.major, sys.version_info.minor)
    # the installed tvm-ffi's (major, minor), which a tvm-ffi variant must equal; None: none
    tvm_ffi: tuple[int, int] | None = None
    # whether MLX is installed, which an `mlx-<backend>` variant needs
    mlx: bool = False
    # macOS's (major, minor) on macOS: compiled Metal code needs 26+; None: not macOS, or not checked
    macos: tuple[int, int] | None = None

    def compiled_variant(self) -> Variant:
        """The name a compiled build for exactly this system gets."""
        return Variant(framework=Torch(self.torch, self.cxx11), compute=Compute(self.backend, self.compute_version),
                       platform=Platform(self.cpu, self.os))

    def fitting_build(self) -> Variant:
        """The compiled build that would run on this machine, for a publisher to make: this
        system's own name, or its CPU build where torch was built for a GPU it cannot see (a GPU
        build could not run here, a CPU one would)."""
        return (self.as_cpu() if self.cpu_first else self).compiled_variant()

    def describe(self) -> str:
        compute = format_compute(self.backend, self.compute_version)
        if not self.device_visible:
            compute += f" with no visible {DEVICE_NAMES.get(self.backend, self.backend)} device (CPU variants first)"
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

    version = _major_minor(torch.__version__)
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


def _major_minor(torch_version: str) -> tuple[int, int]:
    m = _DOTTED_RE.match(torch_version)
    if m is None:
        raise KernelError(f"this torch's version {torch_version!r} does not start with MAJOR.MINOR")
    return int(m[1]), int(m[2])


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


DEVICE_NAMES = {"cuda": "CUDA", "rocm": "ROCm", "xpu": "XPU", "metal": "Metal"}


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
