"""Marking a model's layer class as one kernelize may swap: `@use_kernel_forward_from_hub("RMSNorm")`.
The marks are the class attributes Hugging Face's `kernels` sets (`kernel_layer_name`,
`kernel_condition`), so a class marked by either library is kernelized by either."""

from __future__ import annotations

import inspect
from typing import Callable

from ..errors import InvalidRequest


def use_kernel_forward_from_hub(layer_name: str, condition: Callable | None = None):
    """Class decorator: instances of the class take the forward of the layer mapped to
    `layer_name` when kernelized; `condition(module)` returning False leaves an instance as it is."""
    _check(layer_name, condition, "use_kernel_forward_from_hub")

    def decorate(cls):
        if not inspect.isclass(cls):
            raise InvalidRequest(f"@use_kernel_forward_from_hub({layer_name!r}) decorates an nn.Module class, "
                                 f"not {cls!r} (kbuild does not turn functions into layers)")
        replace_kernel_forward_from_hub(cls, layer_name, condition)
        return cls

    return decorate


def replace_kernel_forward_from_hub(cls, layer_name: str, condition: Callable | None = None) -> None:
    """Mark a class you cannot decorate (a third party's) the way the decorator does."""
    _check(layer_name, condition, "replace_kernel_forward_from_hub")
    cls.kernel_layer_name = layer_name
    # a staticmethod, so reading it through an instance does not bind the instance as its argument
    cls.kernel_condition = staticmethod(condition if condition is not None else _always)


def _always(module) -> bool:
    return True


def _check(layer_name, condition, where: str) -> None:
    if not isinstance(layer_name, str) or not layer_name:
        raise InvalidRequest(f"{where}: the layer name must be a non-empty string, got {layer_name!r}")
    if condition is not None and not callable(condition):
        raise InvalidRequest(f"{where}({layer_name!r}): condition must be a callable taking the module, "
                             f"got {condition!r}")
