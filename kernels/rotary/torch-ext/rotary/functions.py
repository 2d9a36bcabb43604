"""The `apply_rotary` custom op: checks, fake (meta) implementation and autograd."""

import os

import torch

from ._ops import add_op_namespace_prefix
from .kernel import rotary_forward


def _check_inputs(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> None:
    if x.dim() != 4:
        raise ValueError(f"rotary: x must be [batch, seqlen, nheads, headdim], got shape {tuple(x.shape)}")
    if cos.dim() != 2 or cos.shape != sin.shape:
        raise ValueError(
            "rotary: cos and sin must both be [seqlen, rotary_dim // 2], got "
            f"{tuple(cos.shape)} and {tuple(sin.shape)}"
        )
    if cos.shape[0] < x.shape[1]:
        raise ValueError(f"rotary: cos/sin have {cos.shape[0]} positions but x has seqlen {x.shape[1]}")
    if 2 * cos.shape[1] > x.shape[3]:
        raise ValueError(f"rotary: rotary_dim {2 * cos.shape[1]} exceeds headdim {x.shape[3]}")
    for name, t in (("x", x), ("cos", cos), ("sin", sin)):
        if not t.is_floating_point():
            raise TypeError(f"rotary: {name} must be floating point, got {t.dtype}")
    if not (x.device == cos.device == sin.device):
        raise ValueError(f"rotary: x, cos, sin on different devices: {x.device}, {cos.device}, {sin.device}")


@torch.library.custom_op(add_op_namespace_prefix("apply_rotary"), mutates_args=())
def _apply_rotary(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, interleaved: bool, conjugate: bool
) -> torch.Tensor:
    _check_inputs(x, cos, sin)
    if x.device.type == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
        raise RuntimeError(
            "rotary: CPU tensors need the Triton interpreter; set TRITON_INTERPRET=1 before importing"
        )
    return rotary_forward(x, cos, sin, interleaved, conjugate)


@_apply_rotary.register_fake
def _(x, cos, sin, interleaved, conjugate):
    _check_inputs(x, cos, sin)
    return x.new_empty(x.shape)


def _setup_context(ctx, inputs, output):
    x, cos, sin, interleaved, conjugate = inputs
    ctx.interleaved = interleaved
    ctx.conjugate = conjugate
    needs_table_grad = ctx.needs_input_grad[1] or ctx.needs_input_grad[2]
    ctx.save_for_backward(x if needs_table_grad else None, cos, sin)


def _halves(t: torch.Tensor, rotary_dim: int, interleaved: bool):
    if interleaved:
        return t[..., 0:rotary_dim:2], t[..., 1:rotary_dim:2]
    return t[..., : rotary_dim // 2], t[..., rotary_dim // 2 : rotary_dim]


def _table_grads(grad, x, cos, sin, interleaved, conjugate):
    """d(out)/d(cos) and d(out)/d(sin), summed over batch and heads (torch ops, fp32)."""
    rotary_dim = 2 * cos.shape[1]
    g0, g1 = _halves(grad.float(), rotary_dim, interleaved)
    x0, x1 = _halves(x.float(), rotary_dim, interleaved)
    # out0 = x0*cos - x1*s, out1 = x0*s + x1*cos, with s = -sin when conjugate.
    grad_cos = (g0 * x0 + g1 * x1).sum(dim=(0, 2))
    grad_sin = (g1 * x0 - g0 * x1).sum(dim=(0, 2))
    if conjugate:
        grad_sin = -grad_sin
    pad = cos.shape[0] - x.shape[1]  # positions of the table beyond seqlen get zero gradient
    if pad:
        grad_cos = torch.nn.functional.pad(grad_cos, (0, 0, 0, pad))
        grad_sin = torch.nn.functional.pad(grad_sin, (0, 0, 0, pad))
    return grad_cos.to(cos.dtype), grad_sin.to(sin.dtype)


def _backward(ctx, grad):
    x, cos, sin = ctx.saved_tensors
    grad_x = grad_cos = grad_sin = None
    if ctx.needs_input_grad[0]:
        # The rotation is orthogonal: its transpose is the rotation by -angle.
        grad_x = _apply_rotary(grad, cos, sin, ctx.interleaved, not ctx.conjugate)
    if ctx.needs_input_grad[1] or ctx.needs_input_grad[2]:
        grad_cos, grad_sin = _table_grads(grad, x, cos, sin, ctx.interleaved, ctx.conjugate)
    return grad_x, grad_cos, grad_sin, None, None


_apply_rotary.register_autograd(_backward, setup_context=_setup_context)


def apply_rotary(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, interleaved: bool = False
) -> torch.Tensor:
    """Rotary position embedding.

    x: [batch, seqlen, nheads, headdim]; cos, sin: [seqlen_ro >= seqlen, rotary_dim // 2]
    (any floating dtype; rows beyond seqlen are unused). The first rotary_dim = 2 * cos.shape[-1]
    channels of each head are rotated, the rest pass through. interleaved=False rotates channel
    k with channel k + rotary_dim // 2 (GPT-NeoX); True rotates pairs (2k, 2k + 1) (GPT-J).
    Computed in fp32; returns a new contiguous tensor of x's dtype. Differentiable in x, cos, sin.
    """
    return _apply_rotary(x, cos, sin, interleaved, False)
