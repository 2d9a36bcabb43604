"""Layer mapping: swap the `forward` of a model's modules for a kernel's layer (docs/formats.md,
"Layers").

    kernelize(model, {"RMSNorm": "org/rmsnorm@v1:RMSNorm"}, mode="inference")

Every module whose class name (or `kernel_layer_name` attribute) is a key gets the kernel layer's
`forward` bound to it, so the layer reads that module's own attributes (`self.weight`,
`self.variance_epsilon`, …). A layer whose `has_backward` is False is not used in training mode,
one whose `can_torch_compile` is False not under `torch_compile=True`; when no variant of the
kernel fits this system, the module keeps its own forward. Each is said in a warning.
"""

from __future__ import annotations

import importlib
import types
import warnings
from dataclasses import dataclass

from .errors import InvalidRequest, KernelNotFound

MODES = ("inference", "training")


@dataclass(frozen=True)
class LayerRef:
    request: str  # "org/repo@v1"
    layer: str  # "RMSNorm"

    @classmethod
    def parse(cls, key: str, value: str) -> LayerRef:
        request, sep, layer = str(value).rpartition(":")
        if not sep or not request or not layer.isidentifier():
            raise InvalidRequest(f"kernelize mapping {key!r}: {value!r} is not 'org/repo@v1:LayerName'")
        return cls(request, layer)


def kernelize(model, mapping: dict[str, str], *, mode: str = "inference", device=None, hub: str | None = None,
              trust_remote_code: bool | list[str] = False, torch_compile: bool = False):
    """Bind kernel layers' forwards onto the matching modules of `model` (in place); returns `model`.
    `device` ("cpu", "cuda", a torch.device) picks the backend; by default the model's parameters'."""
    if mode not in MODES:
        raise InvalidRequest(f"kernelize: mode must be one of {', '.join(MODES)}, got {mode!r}")
    wanted = {key: LayerRef.parse(key, value) for key, value in mapping.items()}
    backend = _backend(model, device)
    layers: dict[LayerRef, object] = {}
    for module in model.modules():
        name = getattr(module, "kernel_layer_name", None) or type(module).__name__
        ref = wanted.get(name)
        if ref is None:
            continue
        if ref not in layers:
            layers[ref] = _usable_layer(ref, name, mode, torch_compile, backend, hub, trust_remote_code)
        if layers[ref] is not None:
            replace_forward(module, layers[ref])
    return model


def replace_forward(module, layer) -> None:
    """`layer.forward` bound to this one instance; the module's own forward is kept for `restore`."""
    if "_kbuild_original_forward" not in module.__dict__:
        module._kbuild_original_forward = module.__dict__.get("forward")
    module.forward = types.MethodType(layer.forward, module)


def restore(model) -> None:
    """Undo kernelize: every module gets its own forward back."""
    for module in model.modules():
        if "_kbuild_original_forward" in module.__dict__:
            original = module.__dict__.pop("_kbuild_original_forward")
            del module.forward
            if original is not None:
                module.forward = original


def _usable_layer(ref: LayerRef, name: str, mode: str, torch_compile: bool, backend, hub, trust):
    from .hub_loader import get_kernel

    try:
        kernel = get_kernel(ref.request, hub=hub, backend=backend, trust_remote_code=trust)
    except KernelNotFound as e:  # no variant fits (or none is there): the model runs as it is
        warnings.warn(f"kernelize: {name} keeps its own forward: {str(e).splitlines()[0]}", stacklevel=3)
        return None
    layer = _find_layer(kernel, ref)
    if mode == "training" and not getattr(layer, "has_backward", True):
        warnings.warn(f"kernelize: {name} keeps its own forward in training mode: {ref.request}:{ref.layer} "
                      "has no backward (has_backward = False)", stacklevel=3)
        return None
    if torch_compile and not getattr(layer, "can_torch_compile", False):
        warnings.warn(f"kernelize: {name} keeps its own forward under torch.compile: {ref.request}:{ref.layer} "
                      "sets can_torch_compile = False", stacklevel=3)
        return None
    if not callable(getattr(layer, "forward", None)):
        raise TypeError(f"kernelize: {ref.request}:{ref.layer} has no forward")
    return layer


def _find_layer(kernel, ref: LayerRef):
    layers = getattr(kernel, "layers", None)
    if layers is None:
        try:
            layers = importlib.import_module(f"{kernel.__name__}.layers")
        except ModuleNotFoundError:
            raise AttributeError(f"kernelize: {ref.request} has no layers module (layers.py or layers/)") from None
    layer = getattr(layers, ref.layer, None)
    if layer is None:
        found = sorted(n for n in dir(layers) if not n.startswith("_") and isinstance(getattr(layers, n), type))
        raise AttributeError(f"kernelize: {ref.request} has no layer {ref.layer!r} (its layers: {', '.join(found)})")
    return layer


def _backend(model, device) -> str | None:
    """cpu when the model (or `device`) is on the CPU, else the torch's own backend (None)."""
    if device is None:
        param = next(iter(model.parameters()), None)
        device = param.device if param is not None else None
    kind = getattr(device, "type", None) or (str(device).split(":")[0] if device is not None else None)
    return "cpu" if kind == "cpu" else None
