"""Which repository each kernelized layer of a model came from: `get_kernelized_layers`, as
Hugging Face's `kernels` 0.18+ has it. kernelize records the repository in the module's
`_kernel_repo`, the attribute `kernels` uses, so either library reports what either kernelized."""

from __future__ import annotations

from dataclasses import dataclass, field

from .decorators import FUNCTIONS

REPO = "_kernel_repo"  # in a kernelized module's __dict__: the repository its forward came from


@dataclass(frozen=True)
class KernelizedLayer:
    """A kernelized layer (the module) and the repository its kernel came from."""

    module: object
    repo: object


@dataclass(frozen=True)
class KernelizedFunc:
    """A kernelized function layer (the module that wraps it) and the repository its kernel came from."""

    module: object
    repo: object


@dataclass(frozen=True)
class KernelizedLayers:
    """`layers`: module name (as `named_modules` gives it) -> KernelizedLayer; `funcs`: (name of
    the module that carries it, function name) -> KernelizedFunc."""

    layers: dict[str, KernelizedLayer] = field(default_factory=dict)
    funcs: dict[tuple[str, str], KernelizedFunc] = field(default_factory=dict)


def get_kernelized_layers(model) -> KernelizedLayers:
    """The layers and function layers of `model` whose forward a kernel replaced, with their
    repositories (those that kept their own forward are not listed)."""
    found = KernelizedLayers()
    for name, module in model.named_modules():
        repo = module.__dict__.get(REPO)
        if repo is not None:
            found.layers[name] = KernelizedLayer(module, repo)
        # function layers are attributes of the module that calls them, not submodules
        for func_name, func in module.__dict__.get(FUNCTIONS, {}).items():
            repo = func.__dict__.get(REPO)
            if repo is not None:
                found.funcs[(name, func_name)] = KernelizedFunc(func, repo)
    return found
