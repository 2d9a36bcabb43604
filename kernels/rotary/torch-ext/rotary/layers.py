"""Stateless layers (kernel-builder `layers` convention: only `forward`)."""

import torch
from torch import nn

from .functions import apply_rotary


class RotaryEmbedding(nn.Module):
    """Applies rotary position embedding to x [batch, seqlen, nheads, headdim].

    cos, sin: [seqlen, rotary_dim // 2]. Reads an optional boolean attribute `interleaved`
    (GPT-J style) from the module it is bound to; default GPT-NeoX style.
    """

    has_backward = True
    can_torch_compile = True

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        return apply_rotary(x, cos, sin, interleaved=getattr(self, "interleaved", False))
