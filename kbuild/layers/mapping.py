"""The kernel mapping: layer name -> device type -> capability range -> mode -> repository.

`register_kernel_mapping` adds to it for the whole process; `use_kernel_mapping` is a context
manager that adds (or, with inherit_mapping=False, replaces) for its block only, and is undone on
leaving it. As in Hugging Face's `kernels`: the mapping is one dict held by a ContextVar, so a
block's mapping stays with the code that set it, while registering outside any block is seen
everywhere (threads included)."""

from __future__ import annotations

import sys
from contextlib import contextmanager
from contextvars import ContextVar

from ..errors import InvalidRequest
from .device import CapabilityRange, Device, as_device
from .mode import Mode

# name -> device type -> properties (None: any capability) -> {Mode: repository}
Table = dict[str, dict[str, dict[CapabilityRange | None, dict[Mode, object]]]]
# the process-wide table, shared on purpose: register_kernel_mapping outside any use_kernel_mapping block adds to it
_PROCESS_TABLE: Table = {}
_MAPPING: ContextVar[Table] = ContextVar("kbuild_kernel_mapping", default=_PROCESS_TABLE)


def register_kernel_mapping(mapping: dict, inherit_mapping: bool = True) -> None:
    """Add `mapping` ({"RMSNorm": {"cuda": LayerRepository(...)}}, a device's value may also be
    {Mode.TRAINING: repo, Mode.INFERENCE: repo}) to the current mapping; with inherit_mapping=False
    it replaces the current mapping instead."""
    entries = _entries(mapping)  # checked whole before anything changes
    table = _MAPPING.get()
    if not inherit_mapping:
        table.clear()
    _add(table, entries)


@contextmanager
def use_kernel_mapping(mapping: dict, *, inherit_mapping: bool = True):
    """`with use_kernel_mapping({...}):` the mapping, added to (or with inherit_mapping=False,
    instead of) the current one, for the block."""
    entries = _entries(mapping)
    copy = {name: {kind: dict(ranges) for kind, ranges in devices.items()} for name, devices in _MAPPING.get().items()}
    token = _MAPPING.set(copy if inherit_mapping else {})
    try:
        _add(_MAPPING.get(), entries)
        yield
    finally:
        _MAPPING.reset(token)


def current_mapping() -> Table:
    return _MAPPING.get()


def candidates(ranges: dict[CapabilityRange | None, dict[Mode, object]],
               capability: int | None) -> dict[Mode, object] | None:
    """The entry whose capability range holds `capability`, the narrowest when several do (an
    entry without properties holds every capability); None when none does."""
    best, width = None, None
    for properties, modes in ranges.items():
        if properties is None:
            span = sys.maxsize
        elif capability is not None and capability in properties:
            span = properties.max_capability - properties.min_capability
        else:
            continue
        if width is None or span < width:
            best, width = modes, span
    return best


def _add(table: Table, entries) -> None:
    for name, device, modes in entries:  # a later entry for the same device and range replaces the earlier
        table.setdefault(name, {}).setdefault(device.type, {})[device.properties] = modes


def _entries(mapping) -> list[tuple[str, Device, dict[Mode, object]]]:
    """The mapping as (layer name, Device, {Mode: repository}) rows; a one-line error for
    anything else."""
    if not isinstance(mapping, dict):
        raise InvalidRequest("kernel mapping: expected a dict of layer name -> {device: repository}, "
                             f"got {mapping!r}")
    rows = []
    for name, devices in mapping.items():
        if not isinstance(name, str) or not name:
            raise InvalidRequest(f"kernel mapping: a layer name must be a non-empty string, got {name!r}")
        if not isinstance(devices, dict) or not devices:
            raise InvalidRequest(f"kernel mapping {name!r}: expected a dict of device -> repository "
                                 f"(such as {{'cuda': LayerRepository(...)}}), got {devices!r}")
        for key, value in devices.items():
            device = as_device(key, f"kernel mapping {name!r}")
            modes = value if isinstance(value, dict) else {Mode.FALLBACK: value}
            for mode, repo in modes.items():
                if not isinstance(mode, Mode):
                    raise InvalidRequest(f"kernel mapping {name!r} {device.type}: modes must be Mode values "
                                         f"(Mode.TRAINING, ...), got {mode!r}")
                if not callable(getattr(repo, "load", None)) or not isinstance(getattr(repo, "layer_name", None), str):
                    raise InvalidRequest(f"kernel mapping {name!r} {device.type}: expected a LayerRepository (or "
                                         f"LocalLayerRepository, LockedLayerRepository), got {repo!r}")
            rows.append((name, device, dict(modes)))
    return rows
