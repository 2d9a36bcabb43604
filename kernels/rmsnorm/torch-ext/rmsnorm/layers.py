"""Stateless layers whose ``forward`` can replace a Llama-style RMSNorm's.

They hold no parameters of their own: ``forward`` reads ``self.weight`` and
``self.variance_epsilon`` from the module it is bound onto (e.g. transformers' ``LlamaRMSNorm``),
and takes the same arguments. The weight is cast to the input's dtype, and the output has the
input's dtype.
"""

from typing import Tuple

import torch
from torch import nn

from . import fused_add_rms_norm, rms_norm


class RMSNorm(nn.Module):
    """``forward(hidden_states)`` of a Llama-style RMSNorm."""

    has_backward = True
    can_torch_compile = True

    weight: torch.Tensor
    variance_epsilon: float

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return rms_norm(
            hidden_states, self.weight.to(hidden_states.dtype), self.variance_epsilon
        )


class FusedAddRMSNorm(nn.Module):
    """``forward(hidden_states, residual) -> (normed, hidden_states + residual)``."""

    has_backward = True
    can_torch_compile = True

    weight: torch.Tensor
    variance_epsilon: float

    def forward(
        self, hidden_states: torch.Tensor, residual: torch.Tensor
    ) -> Tuple[torch.Tensor, torch.Tensor]:
        return fused_add_rms_norm(
            hidden_states,
            residual,
            self.weight.to(hidden_states.dtype),
            self.variance_epsilon,
        )


__all__ = ["RMSNorm", "FusedAddRMSNorm"]
