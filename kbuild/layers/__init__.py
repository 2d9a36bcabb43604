"""Kernel layers swapped into a model: Hugging Face `kernels`' layer API, on kbuild's loader
(docs/formats.md, "Layers").

    @use_kernel_forward_from_hub("RMSNorm")
    class LlamaRMSNorm(nn.Module): ...

    @use_kernel_forward_from_hub("rotary_pos_emb")      # a function becomes a function layer
    def apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1): ...

    @use_kernelized_func(apply_rotary_pos_emb)         # where kernelize finds it
    class LlamaAttention(nn.Module): ...

    register_kernel_mapping({"RMSNorm": {"cuda": LayerRepository("org/rmsnorm", layer_name="RMSNorm", version=1)}})
    kernelize(model, mode=Mode.TRAINING, device="cuda")

Modules (each one job): mode.py (Mode, KernelizeFallback, which entry serves a mode), device.py
(Device and capability ranges), repository.py (where a layer comes from, and the drop-in check),
mapping.py (register / use_kernel_mapping), decorators.py (marking layer classes and functions),
kernelize.py, kernelized.py (what kernelize bound, from which repository).
Importing this package does not import torch.
"""

from .decorators import replace_kernel_forward_from_hub, use_kernel_forward_from_hub, use_kernelized_func
from .device import CUDAProperties, Device, ROCMProperties
from .kernelize import kernelize, restore
from .kernelized import KernelizedFunc, KernelizedLayer, KernelizedLayers, get_kernelized_layers
from .mapping import register_kernel_mapping, use_kernel_mapping
from .mode import KernelizeFallback, Mode
from .repository import LayerRepository, LocalLayerRepository, LockedLayerRepository

__all__ = ["CUDAProperties", "Device", "KernelizeFallback", "KernelizedFunc", "KernelizedLayer", "KernelizedLayers",
           "LayerRepository", "LocalLayerRepository", "LockedLayerRepository", "Mode", "ROCMProperties",
           "get_kernelized_layers", "kernelize", "register_kernel_mapping",
           "replace_kernel_forward_from_hub", "restore", "use_kernel_forward_from_hub", "use_kernel_mapping",
           "use_kernelized_func"]
