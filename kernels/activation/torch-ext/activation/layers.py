"""Stateless layers over the gated activations (forward only; the ops carry their own backward)."""

import torch
from torch import nn

from ._ops import ops


class SiluAndMul(nn.Module):
    """``silu(x[..., :d]) * x[..., d:]`` for ``x`` of shape ``[..., 2*d]``."""

    has_backward = True
    can_torch_compile = True

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ops.silu_and_mul(x)


class GeluAndMul(nn.Module):
    """``gelu(x[..., :d]) * x[..., d:]`` (exact, erf-based GELU) for ``x`` of shape ``[..., 2*d]``."""

    has_backward = True
    can_torch_compile = True

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ops.gelu_and_mul(x)


class GeluTanhAndMul(nn.Module):
    """``gelu(x[..., :d], approximate="tanh") * x[..., d:]`` for ``x`` of shape ``[..., 2*d]``."""

    has_backward = True
    can_torch_compile = True

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ops.gelu_tanh_and_mul(x)
