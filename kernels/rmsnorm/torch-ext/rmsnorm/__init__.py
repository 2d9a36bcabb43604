"""RMSNorm and fused residual-add + RMSNorm, normalising over the last dimension.

float32, float16 and bfloat16 inputs (weight of the same dtype), float32 accumulation. Every op is
functional; backward passes are ops of their own, wired to the forward ops by autograd functions in
the C++ binding (torch_binding.cpp: no Python runs between the ops in a training step), and every
op has a fake implementation here, so the functions work under autograd and
``torch.compile(fullgraph=True)``.
"""

from typing import Optional, Tuple

import torch

from ._ops import ops, add_op_namespace_prefix


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """``x * rsqrt(mean(x**2, -1) + eps) * weight``; weight has shape ``[x.shape[-1]]``."""
    return ops.rms_norm(x, weight, eps)


def fused_add_rms_norm(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6
) -> Tuple[torch.Tensor, torch.Tensor]:
    """Returns ``(rms_norm(x + residual, weight, eps), x + residual)``.

    ``x + residual`` is rounded to the input dtype before it is normalised, as in eager PyTorch.
    """
    return ops.fused_add_rms_norm(x, residual, weight, eps)


# ---- fake (meta) implementations: shapes and dtypes only ----------------------------------------


def _check(x: torch.Tensor, weight: torch.Tensor) -> None:
    torch._check(x.dim() >= 1, lambda: "x must have at least one dimension")
    torch._check(
        x.dtype in (torch.float32, torch.float16, torch.bfloat16),
        lambda: f"expected a float32, float16 or bfloat16 tensor, got {x.dtype}",
    )
    torch._check(
        weight.dim() == 1 and weight.shape[0] == x.shape[-1],
        lambda: f"weight must have shape [{x.shape[-1]}], got {list(weight.shape)}",
    )
    torch._check(weight.dtype == x.dtype, lambda: "weight must have the dtype of x")


def _like(x: torch.Tensor) -> torch.Tensor:
    # The kernels return contiguous tensors whatever the input's strides.
    return x.new_empty(x.shape)


@torch.library.register_fake(add_op_namespace_prefix("rms_norm"))
def _rms_norm_fake(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    _check(x, weight)
    return _like(x)


@torch.library.register_fake(add_op_namespace_prefix("rms_norm_backward"))
def _rms_norm_backward_fake(
    grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, eps: float
) -> Tuple[torch.Tensor, torch.Tensor]:
    _check(x, weight)
    return _like(x), _like(weight)


@torch.library.register_fake(add_op_namespace_prefix("fused_add_rms_norm"))
def _fused_add_rms_norm_fake(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float
) -> Tuple[torch.Tensor, torch.Tensor]:
    _check(x, weight)
    return _like(x), _like(x)


@torch.library.register_fake(add_op_namespace_prefix("fused_add_rms_norm_backward"))
def _fused_add_rms_norm_backward_fake(
    grad_out: torch.Tensor,
    grad_residual_out: Optional[torch.Tensor],
    residual_out: torch.Tensor,
    weight: torch.Tensor,
    eps: float,
) -> Tuple[torch.Tensor, torch.Tensor]:
    _check(residual_out, weight)
    return _like(residual_out), _like(weight)


from . import layers  # noqa: E402  (layers uses the functions above)

__all__ = ["rms_norm", "fused_add_rms_norm", "layers"]
