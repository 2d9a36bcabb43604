"""Variant names (docs/formats.md, "Variant names"): format, parse, and judge which fit a system.

The one owner of variant names: the builder names its outputs with it, the publisher checks
them with it and the loaders choose with it, so all three always agree.
"""

from __future__ import annotations

import platform
import re
import sys
import sysconfig
from dataclasses import dataclass, replace

from . import gpu_arch as arch_rules
from . import host_abi
from .errors import InvalidRequest, TorchMissing

BACKENDS = ("cpu", "cuda", "metal", "rocm", "xpu", "neuron", "tpu", "cann")

COMPILED, STABLE_ABI, NOARCH, UNIVERSAL = "compiled", "stable-abi", "noarch", "universal"
# Loader preference among variants that fit: higher wins.
_KIND_RANK = {STABLE_ABI: 3, COMPILED: 2, NOARCH: 1, UNIVERSAL: 0}

_COMPILED_RE = re.compile(
    r"^torch(?P<maj>\d)(?P<min>\d+)-(?:(?P<abi>cxx11|cxx98)-)?(?P<compute>[a-z]+\d*)"
    r"-(?P<cpu>x86_64|aarch64)-(?P<os>linux|darwin)$"
)
_STABLE_RE = re.compile(
    r"^torch-stable-abi(?P<maj>\d)(?P<min>\d+)-(?P<compute>[a-z]+\d*)"
    r"-(?P<cpu>x86_64|aarch64)-(?P<os>linux|darwin|windows)$"
)
_NOARCH_RE = re.compile(r"^torch-(?P<backend>" + "|".join(BACKENDS) + r")\Z")


@dataclass(frozen=True)
class Variant:
    """One build configuration. `torch` is the torch version for compiled variants and the
    minimum torch (the ABI) for stable-ABI ones; `compute_version` is the CUDA, ROCm or XPU
    version, None for cpu/metal/noarch."""

    kind: str
    backend: str
    torch: tuple[int, int] | None = None
    compute_version: tuple[int, int] | None = None
    cpu: str | None = None
    os: str | None = None
    cxx11: bool = True

    @property
    def compute(self) -> str:
        """The compute tag: cu130, rocm63, xpu20251, metal, cpu."""
        return format_compute(self.backend, self.compute_version)

    @property
    def name(self) -> str:
        if self.kind == UNIVERSAL:
            return "torch-universal"
        if self.kind == NOARCH:
            return f"torch-{self.backend}"
        maj, mnr = self.torch
        if self.kind == STABLE_ABI:
            return f"torch-stable-abi{maj}{mnr}-{self.compute}-{self.cpu}-{self.os}"
        if self.os == "darwin":
            return f"torch{maj}{mnr}-{self.compute}-{self.cpu}-darwin"
        abi = "cxx11" if self.cxx11 else "cxx98"
        return f"torch{maj}{mnr}-{abi}-{self.compute}-{self.cpu}-{self.os}"

    def __str__(self) -> str:
        return self.name


def format_compute(backend: str, version: tuple[int, int] | None) -> str:
    if backend == "cuda":
        return f"cu{version[0]}{version[1]}"
    if backend in ("rocm", "xpu"):
        return f"{backend}{version[0]}{version[1]}"
    return backend


def parse_compute(tag: str) -> tuple[str, tuple[int, int] | None]:
    """`cu130` -> ("cuda", (13, 0)); `rocm63` -> ("rocm", (6, 3)); `xpu20251` -> ("xpu", (2025, 1))."""
    if tag in ("cpu", "metal"):
        return tag, None
    m = re.fullmatch(r"(cu|rocm|xpu)(\d+)(\d)", tag)
    if not m:
        raise ValueError(f"unknown compute tag {tag!r} (expected cuXY, rocmXY, xpuYYYYN, metal or cpu)")
    backend = {"cu": "cuda", "rocm": "rocm", "xpu": "xpu"}[m[1]]
    return backend, (int(m[2]), int(m[3]))


def parse_variant(name: str) -> Variant:
    """Parse any variant name (docs/formats.md, "Variant names"); ValueError names what was not
    understood."""
    if name == "torch-universal":
        return Variant(UNIVERSAL, backend="")
    if m := _NOARCH_RE.match(name):
        return Variant(NOARCH, backend=m["backend"])
    if m := _STABLE_RE.match(name):
        backend, version = parse_compute(m["compute"])
        return Variant(STABLE_ABI, backend, (int(m["maj"]), int(m["min"])), version, m["cpu"], m["os"])
    if m := _COMPILED_RE.match(name):
        backend, version = parse_compute(m["compute"])
        if m["os"] == "linux" and m["abi"] is None:
            raise ValueError(f"variant {name!r}: a Linux variant needs a C++ ABI tag (cxx11)")
        if m["os"] == "darwin" and m["abi"] is not None:
            # macOS names carry no ABI tag; accepting one would not round-trip through Variant.name.
            raise ValueError(f"variant {name!r}: a macOS variant has no C++ ABI tag")
        return Variant(
            COMPILED, backend, (int(m["maj"]), int(m["min"])), version, m["cpu"], m["os"],
            cxx11=m["abi"] != "cxx98",
        )
    raise ValueError(
        f"not a variant name: {name!r} (expected e.g. torch214-cxx11-cu130-x86_64-linux, "
        "torch-stable-abi210-cu130-x86_64-linux, torch-cuda or torch-universal)"
    )


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

    def compiled_variant(self) -> Variant:
        """The name a compiled build for exactly this system gets."""
        return Variant(COMPILED, self.backend, self.torch, self.compute_version, self.cpu, self.os, self.cxx11)

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
                      device_visible=visible, gpu_arch=device, free_threaded=free_threaded_python())


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
    """None when `variant` can run on `system`, else a short reason it cannot."""
    if variant.kind == UNIVERSAL:
        return None
    if variant.backend == "cpu" and system.cpu_first:
        return why_not(variant, system.as_cpu())
    if variant.backend != system.backend:
        return f"built for {variant.backend}, this system uses {system.backend}"
    if variant.kind == NOARCH:
        return None
    if (variant.cpu, variant.os) != (system.cpu, system.os):
        return f"built for {variant.cpu}-{variant.os}, this is {system.cpu}-{system.os}"
    if variant.kind == STABLE_ABI and system.torch < variant.torch:
        return f"needs torch >= {variant.torch[0]}.{variant.torch[1]}, this is torch {system.torch[0]}.{system.torch[1]}"
    if variant.kind in (COMPILED, STABLE_ABI) and system.free_threaded:
        # its extension is built for the limited API (.abi3.so), which a free-threaded Python
        # does not import: the import would fail with "No module named", or worse
        return "a compiled (.abi3.so) build, which a free-threaded Python cannot import; use a Python with the GIL"
    if variant.kind == COMPILED:
        if variant.torch != system.torch:
            return f"built for torch {variant.torch[0]}.{variant.torch[1]}, this is torch {system.torch[0]}.{system.torch[1]}"
        if variant.os == "linux" and variant.cxx11 != system.cxx11:
            return "built for the other C++ ABI"
    return _compute_mismatch(variant, system)


def _compute_mismatch(variant: Variant, system: SystemInfo) -> str | None:
    built, runtime = variant.compute_version, system.compute_version
    if built is None:
        return None
    if runtime is None:
        return f"built for {variant.compute}, this torch has no {variant.backend} version"
    if variant.backend == "cuda":
        if built[0] != runtime[0] or runtime[1] < built[1]:
            return f"built for CUDA {built[0]}.{built[1]}, this torch uses CUDA {runtime[0]}.{runtime[1]}"
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
                      key=lambda c: (cpu_first and c.variant.backend == "cpu", _preference(c.variant)), reverse=True)
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


def _preference(variant: Variant) -> tuple:
    # Closest compute version and newest ABI win within a kind.
    return (_KIND_RANK[variant.kind], variant.compute_version or (0, 0), variant.torch or (0, 0))


def format_trace(candidates: list[Candidate]) -> str:
    """The resolution trace, one line per candidate, as shown in errors and by the CLI."""
    lines = []
    for c in candidates:
        fits = f"fits ({c.note})" if c.note else "fits"
        lines.append(f"  {c.name}: " + (fits if c.accepted else f"rejected ({c.reason})"))
    return "\n".join(lines)
