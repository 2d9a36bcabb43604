"""Whether a build's GPU code runs on this device: the archs metadata.json records
(`backend.archs`) against the device's compute capability (CUDA) or gfx arch (ROCm).

The one place that knows NVIDIA's compatibility rules, so the trace, `kbuild info` and the
errors all agree. A CUDA arch is spelled as kernel-builder and kbuild record it: `8.0`, `9.0a`,
`10.0f`, `12.1+PTX`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import InvalidSetting

_CUDA_ARCH = re.compile(r"^(?P<major>\d+)\.(?P<minor>\d+)(?P<suffix>[af]?)(?P<ptx>\+PTX)?\Z")
_CUDA_DEVICE = re.compile(r"^(\d+)\.(\d+)\Z")
_ROCM_DEVICE = re.compile(r"^gfx[0-9a-f]+\Z")
CHECKED = ("cuda", "rocm")  # backends whose archs are checked; others record none that matter


@dataclass(frozen=True)
class CudaArch:
    major: int
    minor: int
    suffix: str = ""  # "a": arch-specific, "f": family-specific, "": plain
    ptx: bool = False  # PTX was embedded too: the driver can JIT-compile it

    def runs_on(self, device: tuple[int, int]) -> str | None:
        """How code built for this arch runs on a device of capability `device`: "sass" (the
        machine code itself), "ptx" (JIT-compiled from the embedded PTX), or None (it cannot)."""
        own = (self.major, self.minor)
        if self.suffix == "a":  # arch-specific features exist on exactly this capability
            return "sass" if device == own else None
        # plain and family code runs on the same major with the same or a newer minor
        # (sm_80 on 8.6; sm_100f on 10.0 and 10.3)
        if device[0] == self.major and device[1] >= self.minor:
            return "sass"
        # family PTX stays within its family; plain PTX JIT-compiles for any newer device
        if self.ptx and not self.suffix and device > own:
            return "ptx"
        return None


def parse_cuda_arch(text: str) -> CudaArch | None:
    """`9.0a+PTX` -> CudaArch(9, 0, "a", True); None when it is not spelled like a CUDA arch."""
    m = _CUDA_ARCH.match(text.strip())
    if not m:
        return None
    return CudaArch(int(m["major"]), int(m["minor"]), m["suffix"], bool(m["ptx"]))


@dataclass(frozen=True)
class Fit:
    problem: str | None = None  # why the build cannot run on the device; None: it can (or unknown)
    note: str | None = None  # worth telling when it fits: not checked, or runs only through PTX


def device_fit(backend: str, archs: tuple[str, ...], device: str | None) -> Fit:
    """Whether a `backend` build recording `archs` runs on `device` (this GPU's arch, as
    `parse_device` spells it; None: no device known, nothing is checked)."""
    if device is None or backend not in CHECKED:
        return Fit()
    if not archs:  # older kernel-builder builds record none: loadable, as Hugging Face's loader does
        return Fit(note=f"no {_NAMES[backend]} archs recorded, so not checked against this GPU ({device})")
    if backend == "rocm":
        if device in archs:
            return Fit()
        return Fit(f"built for ROCm archs {', '.join(archs)}; this GPU is {device}")
    parsed = {a: parse_cuda_arch(a) for a in archs}
    if all(p is None for p in parsed.values()):  # a spelling newer than this kbuild: cannot tell
        return Fit(note=f"CUDA archs {', '.join(archs)} not understood, so not checked against this GPU ({device})")
    capability = _cuda_device(device)
    ways = {a: p.runs_on(capability) for a, p in parsed.items() if p is not None}
    if "sass" in ways.values():
        return Fit()
    if "ptx" in ways.values():
        via = ", ".join(a for a, way in ways.items() if way == "ptx")
        return Fit(note=f"this GPU ({device}) runs it by JIT-compiling the PTX of {via}")
    return Fit(f"built for CUDA archs {', '.join(archs)}, none of which runs on this GPU "
               f"(compute capability {device})")


def parse_device(backend: str, text: str, where: str) -> str:
    """A device arch as given (KBUILD_GPU_ARCH): `9.0` for CUDA, `gfx942` for ROCm (a feature
    suffix such as `:sramecc+:xnack-` is dropped). InvalidSetting (a ValueError) names `where` and
    the forms."""
    value = text.strip()
    if backend == "rocm":
        value = value.split(":")[0]
        if _ROCM_DEVICE.match(value):
            return value
        raise InvalidSetting(f"{where}: expected a ROCm GPU arch such as gfx942, got {text!r}")
    if _CUDA_DEVICE.match(value):
        return value
    raise InvalidSetting(f"{where}: expected a CUDA compute capability such as 9.0 or 12.0, got {text!r}")


def probe(torch, backend: str) -> str | None:
    """The arch of torch's current device, None without a visible one. Asks torch for the device's
    properties (initialising its CUDA runtime, as a CUDA kernel's first use would)."""
    if backend not in CHECKED or not torch.cuda.is_available():
        return None
    if backend == "rocm":  # ROCm devices answer through torch.cuda too
        return parse_device("rocm", torch.cuda.get_device_properties(torch.cuda.current_device()).gcnArchName,
                            "torch.cuda.get_device_properties().gcnArchName")
    major, minor = torch.cuda.get_device_capability()
    return f"{major}.{minor}"


def describe_device(backend: str, device: str) -> str:
    return f"a GPU of compute capability {device}" if backend == "cuda" else f"a {device} GPU"


def _cuda_device(device: str) -> tuple[int, int]:
    major, minor = device.split(".")
    return int(major), int(minor)


_NAMES = {"cuda": "CUDA", "rocm": "ROCm"}
