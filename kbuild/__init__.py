"""kbuild's runtime: load ABI-tagged kernel builds (their formats: docs/formats.md).

Every loading failure is a `KernelError` (kbuild.errors), each subclass keeping the built-in base
it always had (NoVariantFits is a FileNotFoundError, HubUnreachable an OSError, ...).

Light on purpose: importing it loads neither torch, huggingface_hub nor anything of the builder,
and its names load on first use (`from kbuild import get_kernel` imports the loader then); torch
is imported only when a system is detected or a kernel is loaded, huggingface_hub only when an
HTTP hub is used.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # typing's constant, without importing typing

__version__ = "0.1.0"

# name -> the module that defines it
_EXPORTS = {
    "digest_tree": "digest", "verify_tree": "digest",
    "HubUnreachable": "errors", "IntegrityError": "errors", "InvalidLayer": "errors", "KernelError": "errors",
    "KernelNotFound": "errors",
    "NoVariantFits": "errors", "RepoNotFound": "errors", "RevisionNotFound": "errors", "SignatureRefused": "errors",
    "Resolution": "hub_loader", "get_kernel": "hub_loader", "get_kernel_variants": "hub_loader",
    "has_kernel": "hub_loader", "install_kernel": "hub_loader", "resolve_kernel": "hub_loader",
    "CUDAProperties": "layers", "Device": "layers", "KernelizeFallback": "layers", "LayerRepository": "layers",
    "LocalLayerRepository": "layers", "LockedLayerRepository": "layers", "Mode": "layers", "ROCMProperties": "layers",
    "kernelize": "layers", "register_kernel_mapping": "layers", "replace_kernel_forward_from_hub": "layers",
    "use_kernel_forward_from_hub": "layers", "use_kernel_mapping": "layers", "use_kernelized_func": "layers",
    "get_local_kernel": "local",
    "get_locked_kernel": "lockfile", "load_kernel": "lockfile",
    "LoadedKernel": "loading", "get_loaded_kernels": "loading",
    "KernelizedFunc": "layers", "KernelizedLayer": "layers", "KernelizedLayers": "layers",
    "get_kernelized_layers": "layers",
    "VariantMetadata": "metadata",
    "SystemInfo": "variants", "Variant": "variants", "choose": "choice", "detect_system": "variants",
    "format_trace": "choice", "parse_variant": "variants", "resolve": "choice",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'kbuild' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # next time without this hook
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))


if TYPE_CHECKING:
    from .choice import choose, format_trace, resolve
    from .digest import digest_tree, verify_tree
    from .errors import (
        HubUnreachable,
        IntegrityError,
        InvalidLayer,
        KernelError,
        KernelNotFound,
        NoVariantFits,
        RepoNotFound,
        RevisionNotFound,
        SignatureRefused,
    )
    from .hub_loader import Resolution, get_kernel, get_kernel_variants, has_kernel, install_kernel, resolve_kernel
    from .layers import (
        CUDAProperties,
        Device,
        KernelizedFunc,
        KernelizedLayer,
        KernelizedLayers,
        KernelizeFallback,
        LayerRepository,
        LocalLayerRepository,
        LockedLayerRepository,
        Mode,
        ROCMProperties,
        get_kernelized_layers,
        register_kernel_mapping,
        replace_kernel_forward_from_hub,
        use_kernel_forward_from_hub,
        use_kernel_mapping,
        use_kernelized_func,
    )

    # the function from its module: `.layers` also holds the module of that name, which mypy takes for it
    from .layers.kernelize import kernelize
    from .loading import LoadedKernel, get_loaded_kernels
    from .local import get_local_kernel
    from .lockfile import get_locked_kernel, load_kernel
    from .metadata import VariantMetadata
    from .variants import SystemInfo, Variant, detect_system, parse_variant
