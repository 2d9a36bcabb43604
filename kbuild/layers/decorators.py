"""Marking what kernelize may swap: a model's layer class, `@use_kernel_forward_from_hub("RMSNorm")`,
or a function it calls, `@use_kernel_forward_from_hub("rotary_pos_emb")` on the function plus
`@use_kernelized_func(apply_rotary_pos_emb)` on the module class that calls it. The marks are the
attributes Hugging Face's `kernels` sets (`kernel_layer_name`, `kernel_condition`, a module's
`_kernel_funcs`), so what either library marked is kernelized by either."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable

from ..errors import InvalidRequest

FUNCTIONS = "_kernel_funcs"  # a module's function layers by name, in its __dict__ (not submodules)


def use_kernel_forward_from_hub(layer_name: str, condition: Callable | None = None):
    """Decorator. On an nn.Module class: its instances take the forward of the layer mapped to
    `layer_name` when kernelized; `condition(module)` returning False leaves an instance as it is.
    On a function: the function becomes a function layer, one nn.Module instance that is called as
    the function was and whose forward takes the function's arguments; kernelize finds it through
    the module classes marked `@use_kernelized_func(function)`, and swapping its forward changes
    every call of the function."""
    _check(layer_name, condition, "use_kernel_forward_from_hub")

    def decorate(target):
        if inspect.isfunction(target):
            layer = _function_layer(target)
            replace_kernel_forward_from_hub(layer, layer_name, condition)
            return layer()
        if not inspect.isclass(target):
            raise InvalidRequest(f"@use_kernel_forward_from_hub({layer_name!r}) decorates an nn.Module class or a "
                                 f"function, not {target!r}")
        replace_kernel_forward_from_hub(target, layer_name, condition)
        return target

    return decorate


def replace_kernel_forward_from_hub(cls, layer_name: str, condition: Callable | None = None) -> None:
    """Mark a class you cannot decorate (a third party's) the way the decorator does."""
    _check(layer_name, condition, "replace_kernel_forward_from_hub")
    cls.kernel_layer_name = layer_name
    # a staticmethod, so reading it through an instance does not bind the instance as its argument
    cls.kernel_condition = staticmethod(condition if condition is not None else _always)


def use_kernelized_func(*functions):
    """Class decorator: each instance carries `functions` (function layers made by
    `@use_kernel_forward_from_hub` on a function) where kernelize looks for them, so kernelizing a
    model that holds such a module swaps the functions' forwards too."""
    def decorate(cls):
        if not inspect.isclass(cls):
            raise InvalidRequest(f"@use_kernelized_func decorates an nn.Module class, not {cls!r}")
        for function in functions:  # checked here, where `kernels` checks them
            if getattr(function, "kernel_layer_name", None) is None:
                raise InvalidRequest(f"@use_kernelized_func on {cls.__name__}: "
                                     f"{getattr(function, '__name__', function)!r} is not marked with "
                                     f"@use_kernel_forward_from_hub (decorate the function first)")
        original = cls.__init__

        @functools.wraps(original)
        def __init__(self, *args, **kwargs):
            original(self, *args, **kwargs)
            carried = self.__dict__.setdefault(FUNCTIONS, {})
            for function in functions:  # keyed as `kernels` keys them
                carried[getattr(function, "__name__", None) or function.kernel_layer_name] = function

        cls.__init__ = __init__  # type: ignore[method-assign]  # the decorator wraps the class's own constructor
        return cls

    return decorate


def carried_functions(module) -> list:
    """The function layers `module` carries (`use_kernelized_func`, kbuild's or `kernels`')."""
    return list(module.__dict__.get(FUNCTIONS, {}).values())


def _function_layer(function: Callable) -> type:
    """An nn.Module class whose forward calls `function`, with the function's signature after
    `self` (kernelize's drop-in check compares a layer's forward with it)."""
    from torch import nn

    class FunctionLayer(nn.Module):
        # what a layer says of itself; a function may say it too
        has_backward = getattr(function, "has_backward", True)
        can_torch_compile = getattr(function, "can_torch_compile", False)

        def forward(self, *args, **kwargs):
            return function(*args, **kwargs)

    signature = inspect.signature(function)
    self_first = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD), *signature.parameters.values()]
    # inspect.signature reads a function's __signature__ before its code
    FunctionLayer.forward.__signature__ = signature.replace(parameters=self_first)  # type: ignore[attr-defined]
    # named as the function in reprs and errors ("apply_rotary_pos_emb.forward takes 5 arguments")
    FunctionLayer.__doc__ = function.__doc__
    FunctionLayer.__name__, FunctionLayer.__qualname__ = function.__name__, function.__qualname__
    FunctionLayer.forward.__qualname__ = function.__qualname__
    return FunctionLayer


def _always(module) -> bool:
    return True


def _check(layer_name, condition, where: str) -> None:
    if not isinstance(layer_name, str) or not layer_name:
        raise InvalidRequest(f"{where}: the layer name must be a non-empty string, got {layer_name!r}")
    if condition is not None and not callable(condition):
        raise InvalidRequest(f"{where}({layer_name!r}): condition must be a callable taking the module, "
                             f"got {condition!r}")
