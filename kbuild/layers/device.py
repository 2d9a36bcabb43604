"""The device a mapping entry is for (`Device`, with an optional GPU capability range) and the
device a model runs on. Device types are Hugging Face's names; each maps to the kbuild backend
whose variants are loaded for it."""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

from ..errors import InvalidRequest

# Hugging Face's device type -> kbuild's backend (variant names: docs/formats.md)
BACKEND_OF = {"cpu": "cpu", "cuda": "cuda", "rocm": "rocm", "mps": "metal", "xpu": "xpu", "npu": "cann",
              "neuron": "neuron", "tpu": "tpu"}


@dataclass(frozen=True)
class CapabilityRange:
    min_capability: int  # 75 for compute capability 7.5
    max_capability: int

    def __post_init__(self):
        for key in ("min_capability", "max_capability"):
            value = getattr(self, key)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise InvalidRequest(f"{type(self).__name__}: {key} must be a whole number such as 90 "
                                     f"(capability 9.0), got {value!r}")
        if self.min_capability > self.max_capability:
            raise InvalidRequest(f"{type(self).__name__}: min_capability ({self.min_capability}) must be <= "
                                 f"max_capability ({self.max_capability})")

    def __contains__(self, capability: int) -> bool:
        return self.min_capability <= capability <= self.max_capability


@dataclass(frozen=True)
class CUDAProperties(CapabilityRange):
    """A range of CUDA compute capabilities, both ends included."""


@dataclass(frozen=True)
class ROCMProperties(CapabilityRange):
    """A range of ROCm capabilities (torch.cuda.get_device_capability on ROCm), both ends included."""


_PROPERTIES_FOR = {CUDAProperties: "cuda", ROCMProperties: "rocm"}


@dataclass(frozen=True)
class Device:
    type: str
    properties: CUDAProperties | ROCMProperties | None = None

    def __post_init__(self):
        if self.type not in BACKEND_OF:
            raise InvalidRequest(f"Device: unknown device type {self.type!r} (known: {', '.join(sorted(BACKEND_OF))})")
        if self.properties is not None:
            wants = _PROPERTIES_FOR.get(type(self.properties))
            if wants is None:
                raise InvalidRequest(f"Device: properties must be CUDAProperties or ROCMProperties, "
                                     f"got {self.properties!r}")
            if wants != self.type:
                raise InvalidRequest(f"Device: {type(self.properties).__name__} is only for {wants!r} devices, "
                                     f"not {self.type!r}")

    @property
    def backend(self) -> str:
        return BACKEND_OF[self.type]


def as_device(value, where: str) -> Device:
    """A Device from a Device, a device type ("cuda") or a torch.device ("cuda:1" counts as cuda)."""
    if isinstance(value, Device):
        return value
    kind = getattr(value, "type", None)
    if kind is None and isinstance(value, str):
        kind = value.split(":")[0]
    if kind is None:
        raise InvalidRequest(f"{where}: a device must be a Device, a device type such as 'cuda', or a "
                             f"torch.device, got {value!r}")
    if kind == "cuda" and not isinstance(value, str):
        kind = _cuda_flavour()  # a torch.device("cuda") is a ROCm GPU in a ROCm torch
    if kind not in BACKEND_OF:
        raise InvalidRequest(f"{where}: unknown device type {kind!r} (known: {', '.join(sorted(BACKEND_OF))})")
    return Device(kind)


def model_device(model) -> Device:
    """The device of the model's first parameter (or buffer)."""
    for tensor in (*model.parameters(), *model.buffers()):
        return as_device(tensor.device, "kernelize")
    raise InvalidRequest("kernelize: the model has no parameters or buffers to tell its device from; pass device=")


def capability(device: Device) -> int | None:
    """This machine's GPU capability for `device` (90 for 9.0): KBUILD_GPU_ARCH when set, else
    the current device's; None without a GPU of that kind."""
    if device.type not in ("cuda", "rocm"):
        return None
    from ..variants import detect_system  # noqa: PLC0415 - cost: only a GPU device asks the system

    try:
        arch = detect_system(device.backend).gpu_arch
    except InvalidRequest:  # this torch was not built for that backend
        return None
    if arch is None:
        return None
    if device.type == "rocm":  # gfx942 -> 94, as torch reports it (major, minor; the stepping dropped)
        found = re.fullmatch(r"gfx(\d+)([0-9a-f])[0-9a-f]", arch)
        return int(found.group(1)) * 10 + int(found.group(2), 16) if found else None
    major, _, minor = arch.partition(".")
    return int(major) * 10 + int("".join(itertools.takewhile(str.isdecimal, minor)) or 0)


def _cuda_flavour() -> str:
    import torch

    return "rocm" if getattr(torch.version, "hip", None) else "cuda"
