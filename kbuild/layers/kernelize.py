"""kernelize: bind mapped kernel layers' forwards onto a model's modules, in place.

For each module whose class is marked with a layer name (`@use_kernel_forward_from_hub`), and each
function layer a module carries (`@use_kernelized_func`; once, however many modules carry it), the
current mapping (mapping.py) is looked up by name, then by the device's type, then by the GPU's
capability, then by mode (mode.py); the chosen repository is loaded through kbuild's loader and
its layer's forward is bound to that one instance, so it reads the module's own attributes
(`self.weight`, ...). When a step finds nothing, the module keeps (or gets back) its own forward,
if `use_fallback` allows that case, and a warning says why; otherwise kernelize raises.
"""

from __future__ import annotations

import logging
import os
import types
import warnings

from ..errors import InvalidRequest, KernelNotFound
from .decorators import carried_functions
from .device import Device, as_device, capability, model_device
from .kernelized import REPO
from .mapping import candidates, current_mapping, use_kernel_mapping
from .mode import KernelizeFallback, Mode, requested_mode, serving_order
from .repository import KBUILD_REPOSITORIES, check_drop_in, parse_shorthand

logger = logging.getLogger("kbuild.layers")


class _Fallback(Exception):
    """A case `use_fallback` may allow: the module keeps its own forward."""

    def __init__(self, case: KernelizeFallback, reason: str, cause: Exception | None = None):
        super().__init__(reason)
        self.case, self.cause = case, cause


def kernelize(model, mapping: dict | None = None, *, mode=Mode.INFERENCE, device=None, use_fallback=True,
              hub: str | None = None, trust_remote_code: bool | list[str] = False, torch_compile: bool = False):
    """Bind kernel layers onto the matching modules of `model` (in place); returns `model`.

    `mode`: Mode.INFERENCE or Mode.TRAINING, each optionally `| Mode.TORCH_COMPILE`.
    `device`: "cuda", "cpu", a torch.device or a Device; by default the model's parameters'.
    `use_fallback`: True (KernelizeFallback.DEFAULT), False (NONE) or KernelizeFallback flags.
    `mapping`: added to the current mapping for this call; besides the registered form it takes
    kbuild's short one, {"RMSNorm": "org/repo@v1:RMSNorm"} (for whichever device the model is on,
    loaded from `hub` with `trust_remote_code`), and its names also match modules by class name.
    """
    wanted = requested_mode(mode, torch_compile)
    allowed = _fallback_cases(use_fallback)
    target = model_device(model) if device is None else as_device(device, "kernelize")
    if mapping is None:
        return _kernelize(model, wanted, target, allowed, by_class=())
    if not isinstance(mapping, dict):
        raise InvalidRequest(f"kernelize: mapping must be a dict of layer name -> repository, got {mapping!r}")
    expanded = {name: value if isinstance(value, dict)
                else {target.type: _repository(name, value, hub, trust_remote_code)}
                for name, value in mapping.items()}
    with use_kernel_mapping(expanded):
        return _kernelize(model, wanted, target, allowed, by_class=tuple(mapping))


def restore(model) -> None:
    """Undo kernelize: every module and function layer gets its own forward back."""
    for module in _targets(model):
        _own_forward(module)


def _kernelize(model, wanted: Mode, device: Device, allowed: KernelizeFallback, by_class: tuple[str, ...]):
    disabled = os.environ.get("DISABLE_KERNEL_MAPPING", "0").strip() not in ("", "0")
    table = current_mapping()
    gpu = capability(device) if device.type in ("cuda", "rocm") else None
    layers: dict = {}  # (repository, host class) -> the layer, loaded and checked once per call
    said: set[tuple[str, str]] = set()
    for module in _targets(model):
        host = type(module)
        name = getattr(module, "kernel_layer_name", None)
        if name is None and host.__name__ in by_class:
            name = host.__name__
        if name is None:
            continue
        condition = getattr(module, "kernel_condition", None)
        if condition is not None and not condition(module):
            logger.info("kernelize: %s (%s) left as it is: its kernel_condition is False", host.__name__, name)
            continue
        if disabled:
            _own_forward(module)
            continue
        try:
            repo, layer = _choose(name, host, table, wanted, device, gpu, layers)
        except _Fallback as e:
            if e.case not in allowed and e.cause is not None:
                # the loader's own error (NoVariantFits, RepoNotFound, ...) as get_kernel raises it, its cause kept
                raise e.cause  # noqa: B904
            if e.case not in allowed:
                raise InvalidRequest(f"kernelize: {name}: {e} (use_fallback does not allow "
                                     f"{e.case.name} for this)") from None
            if (name, str(e)) not in said:
                said.add((name, str(e)))
                if e.case == KernelizeFallback.NO_LAYER:
                    logger.warning("kernelize: %s keeps its own forward: %s", name, e)
                else:
                    warnings.warn(f"kernelize: {name} keeps its own forward: {e}", stacklevel=3)
            _own_forward(module)
            continue
        _bind(module, layer, repo)
    return model


def _targets(model):
    """The model's modules, each after the function layers it carries; each one once."""
    seen: set[int] = set()
    for module in model.modules():
        for target in (*carried_functions(module), module):
            if id(target) not in seen:
                seen.add(id(target))
                yield target


def _choose(name: str, host: type, table, wanted: Mode, device: Device, gpu: int | None, layers: dict):
    devices = table.get(name)
    if devices is None:
        raise _Fallback(KernelizeFallback.NO_LAYER, "no kernel mapping has this layer name")
    ranges = devices.get(device.type)
    if ranges is None:
        raise _Fallback(KernelizeFallback.NO_DEVICE, f"its mapping has no entry for {device.type} "
                                                     f"(it has {', '.join(sorted(devices))})")
    modes = candidates(ranges, gpu)
    if modes is None:
        here = f"capability {gpu}" if gpu is not None else f"no {device.type} GPU seen"
        raise _Fallback(KernelizeFallback.NO_COMPATIBLE_PROPERTIES,
                        f"no {device.type} entry of its mapping covers this GPU ({here})")
    order = serving_order(modes, wanted)
    if not order:
        raise _Fallback(KernelizeFallback.NO_COMPATIBLE_MODE,
                        f"no entry of its mapping serves {wanted} (it has {', '.join(map(str, modes))})")
    registered = order[0]
    repo = modes[registered]
    if (repo, host) not in layers:
        layers[repo, host] = _load(repo, host, device)
    layer, missing = layers[repo, host]
    if layer is None:
        raise _Fallback(KernelizeFallback.CANNOT_LOAD, str(missing), missing)
    has_backward, compiles = getattr(layer, "has_backward", True), getattr(layer, "can_torch_compile", False)
    # registered for a mode the layer says it cannot do: the mapping is wrong, whatever use_fallback says
    if Mode.TRAINING in registered and not has_backward:
        raise InvalidRequest(f"kernelize: {repo} does not support backward (has_backward = False), yet it is "
                             f"mapped for {name} in {registered}")
    if Mode.TORCH_COMPILE in registered and not compiles:
        raise InvalidRequest(f"kernelize: {repo} does not support torch.compile (can_torch_compile is not True), "
                             f"yet it is mapped for {name} in {registered}")
    if Mode.TRAINING in wanted and not has_backward:
        raise _Fallback(KernelizeFallback.NO_COMPATIBLE_MODE,
                        f"{repo} does not support mode {wanted}: it has no backward (has_backward = False)")
    if Mode.TORCH_COMPILE in wanted and not compiles:
        raise _Fallback(KernelizeFallback.NO_COMPATIBLE_MODE,
                        f"{repo} does not support mode {wanted}: under torch.compile it sets can_torch_compile = False")
    return repo, layer


def _load(repo, host: type, device: Device) -> tuple[type | None, KernelNotFound | None]:
    """The repository's layer, checked to be a drop-in for `host`; (None, the error) when the
    kernel is not there or no variant of it fits (a fallback case). Verification and trust
    failures raise."""
    try:
        # kbuild's repositories load for the device's backend; another library's take no argument
        layer = repo.load(device.backend) if isinstance(repo, KBUILD_REPOSITORIES) else repo.load()
    except KernelNotFound as e:
        return None, e
    check_drop_in(layer, host, repo)
    return layer, None


def _repository(name: str, value, hub: str | None, trust_remote_code):
    if isinstance(value, str):
        return parse_shorthand(name, value, hub, trust_remote_code)
    return value


def _fallback_cases(use_fallback) -> KernelizeFallback:
    if use_fallback is True:
        return KernelizeFallback.DEFAULT
    if use_fallback is False:
        return KernelizeFallback.NONE
    if isinstance(use_fallback, KernelizeFallback):
        return use_fallback
    raise InvalidRequest("kernelize: use_fallback must be True, False or KernelizeFallback flags, "
                         f"got {use_fallback!r}")


def _bind(module, layer, repo) -> None:
    """`layer.forward` bound to this one instance; the module's own is kept for restore, the
    repository for get_kernelized_layers."""
    if "_kbuild_original_forward" not in module.__dict__:
        module._kbuild_original_forward = module.__dict__.get("forward")
    module.forward = types.MethodType(layer.forward, module)
    module.__dict__[REPO] = repo


def _own_forward(module) -> None:
    module.__dict__.pop(REPO, None)
    if "_kbuild_original_forward" in module.__dict__:
        original = module.__dict__.pop("_kbuild_original_forward")
        module.__dict__.pop("forward", None)
        if original is not None:
            module.forward = original
