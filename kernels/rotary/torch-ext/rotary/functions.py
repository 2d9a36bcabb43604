"""The `apply_rotary` and `apply_rotary_qk` custom ops: checks, fake (meta) implementations and
autograd. `apply_rotary_qk` rotates q and k in one op call and one kernel launch."""

import os

import torch

from ._ops import add_op_namespace_prefix
from .kernel import rotary_forward, rotary_forward_qk

# Triton reads this when the kernels are defined (import), so reading it once here is enough.
_INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"


def _check_tables(cos: torch.Tensor, sin: torch.Tensor) -> None:
    if cos.dim() != 2 or cos.shape != sin.shape:
        raise ValueError(
            "rotary: cos and sin must both be [seqlen, rotary_dim // 2], got "
            f"{tuple(cos.shape)} and {tuple(sin.shape)}"
        )
    if not (cos.is_floating_point() and sin.is_floating_point()):
        raise TypeError(f"rotary: cos and sin must be floating point, got {cos.dtype} and {sin.dtype}")
    if cos.device != sin.device:
        raise ValueError(f"rotary: cos and sin on different devices: {cos.device}, {sin.device}")


def _check_x(name: str, x: torch.Tensor, cos: torch.Tensor) -> None:
    """x against the (already checked) tables. Plain comparisons: this runs on every call."""
    if x.dim() != 4:
        raise ValueError(f"rotary: {name} must be [batch, seqlen, nheads, headdim], got shape {tuple(x.shape)}")
    if cos.shape[0] < x.shape[1]:
        raise ValueError(f"rotary: cos/sin have {cos.shape[0]} positions but {name} has seqlen {x.shape[1]}")
    if 2 * cos.shape[1] > x.shape[3]:
        raise ValueError(f"rotary: rotary_dim {2 * cos.shape[1]} exceeds headdim {x.shape[3]}")
    if not x.is_floating_point():
        raise TypeError(f"rotary: {name} must be floating point, got {x.dtype}")
    if x.device != cos.device:
        raise ValueError(f"rotary: {name} and cos/sin on different devices: {x.device}, {cos.device}")


def _check_inputs(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> None:
    _check_tables(cos, sin)
    _check_x("x", x, cos)


def _check_qk(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> None:
    _check_tables(cos, sin)
    _check_x("q", q, cos)
    _check_x("k", k, cos)
    qs, ks = q.shape, k.shape
    if qs[0] != ks[0] or qs[1] != ks[1] or qs[3] != ks[3]:
        raise ValueError(f"rotary: q and k must share batch, seqlen and headdim, got {tuple(qs)} and {tuple(ks)}")
    if q.dtype != k.dtype:
        raise TypeError(f"rotary: q and k must have one dtype, got {q.dtype} and {k.dtype}")


def _check_runnable(x: torch.Tensor) -> None:
    if not _INTERPRET and x.device.type == "cpu":
        raise RuntimeError(
            "rotary: CPU tensors need the Triton interpreter; set TRITON_INTERPRET=1 before importing"
        )


@torch.library.custom_op(add_op_namespace_prefix("apply_rotary"), mutates_args=())
def _apply_rotary(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, interleaved: bool, conjugate: bool
) -> torch.Tensor:
    _check_inputs(x, cos, sin)
    _check_runnable(x)
    return rotary_forward(x, cos, sin, interleaved, conjugate)


@_apply_rotary.register_fake
def _(x, cos, sin, interleaved, conjugate):
    _check_inputs(x, cos, sin)
    return x.new_empty(x.shape)


@torch.library.custom_op(add_op_namespace_prefix("apply_rotary_qk"), mutates_args=())
def _apply_rotary_qk(
    q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, interleaved: bool, conjugate: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    _check_qk(q, k, cos, sin)
    _check_runnable(q)
    return rotary_forward_qk(q, k, cos, sin, interleaved, conjugate)


@_apply_rotary_qk.register_fake
def _(q, k, cos, sin, interleaved, conjugate):
    _check_qk(q, k, cos, sin)
    return q.new_empty(q.shape), k.new_empty(k.shape)


def _halves(t: torch.Tensor, rotary_dim: int, interleaved: bool):
    if interleaved:
        return t[..., 0:rotary_dim:2], t[..., 1:rotary_dim:2]
    return t[..., : rotary_dim // 2], t[..., rotary_dim // 2 : rotary_dim]


def _table_grads(pairs, cos, sin, interleaved, conjugate):
    """d(out)/d(cos) and d(out)/d(sin) for (grad, x) pairs that share the tables, summed over the
    pairs, batch and heads in fp32 (torch ops), then rounded to the tables' dtypes."""
    rotary_dim = 2 * cos.shape[1]
    grad_cos = grad_sin = 0
    for grad, x in pairs:
        g0, g1 = _halves(grad.float(), rotary_dim, interleaved)
        x0, x1 = _halves(x.float(), rotary_dim, interleaved)
        # out0 = x0*cos - x1*s, out1 = x0*s + x1*cos, with s = -sin when conjugate.
        grad_cos = grad_cos + (g0 * x0 + g1 * x1).sum(dim=(0, 2))
        grad_sin = grad_sin + (g1 * x0 - g0 * x1).sum(dim=(0, 2))
    if conjugate:
        grad_sin = -grad_sin
    pad = cos.shape[0] - pairs[0][1].shape[1]  # positions of the table beyond seqlen get zero gradient
    if pad:
        grad_cos = torch.nn.functional.pad(grad_cos, (0, 0, 0, pad))
        grad_sin = torch.nn.functional.pad(grad_sin, (0, 0, 0, pad))
    return grad_cos.to(cos.dtype), grad_sin.to(sin.dtype)


def _setup_context(ctx, inputs, output):
    x, cos, sin, interleaved, conjugate = inputs
    ctx.interleaved = interleaved
    ctx.conjugate = conjugate
    needs_table_grad = ctx.needs_input_grad[1] or ctx.needs_input_grad[2]
    ctx.save_for_backward(x if needs_table_grad else None, cos, sin)


def _backward(ctx, grad):
    x, cos, sin = ctx.saved_tensors
    grad_x = grad_cos = grad_sin = None
    if ctx.needs_input_grad[0]:
        # The rotation is orthogonal: its transpose is the rotation by -angle.
        grad_x = _apply_rotary(grad, cos, sin, ctx.interleaved, not ctx.conjugate)
    if ctx.needs_input_grad[1] or ctx.needs_input_grad[2]:
        grad_cos, grad_sin = _table_grads([(grad, x)], cos, sin, ctx.interleaved, ctx.conjugate)
    return grad_x, grad_cos, grad_sin, None, None


_apply_rotary.register_autograd(_backward, setup_context=_setup_context)


def _setup_context_qk(ctx, inputs, output):
    q, k, cos, sin, interleaved, conjugate = inputs
    ctx.interleaved = interleaved
    ctx.conjugate = conjugate
    needs_table_grad = ctx.needs_input_grad[2] or ctx.needs_input_grad[3]
    ctx.save_for_backward(*((q, k) if needs_table_grad else (None, None)), cos, sin)


def _backward_qk(ctx, grad_q, grad_k):
    q, k, cos, sin = ctx.saved_tensors
    grad_q_in = grad_k_in = grad_cos = grad_sin = None
    if ctx.needs_input_grad[0] or ctx.needs_input_grad[1]:
        # Both transposed rotations in one call and one launch, as in the forward.
        grad_q_in, grad_k_in = _apply_rotary_qk(grad_q, grad_k, cos, sin, ctx.interleaved, not ctx.conjugate)
        grad_q_in = grad_q_in if ctx.needs_input_grad[0] else None
        grad_k_in = grad_k_in if ctx.needs_input_grad[1] else None
    if ctx.needs_input_grad[2] or ctx.needs_input_grad[3]:
        grad_cos, grad_sin = _table_grads([(grad_q, q), (grad_k, k)], cos, sin, ctx.interleaved, ctx.conjugate)
    return grad_q_in, grad_k_in, grad_cos, grad_sin, None, None


_apply_rotary_qk.register_autograd(_backward_qk, setup_context=_setup_context_qk)


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


def apply_rotary_qk(
    q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, interleaved: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """Rotary position embedding of q and k in one op call and one kernel launch.

    q: [batch, seqlen, nheads_q, headdim], k: [batch, seqlen, nheads_k, headdim] (head counts may
    differ, as in GQA/MQA; one dtype); cos, sin and interleaved as for `apply_rotary`, which this
    equals applied to q and to k. Returns (q_out, k_out), new contiguous tensors.
    Differentiable in q, k, cos, sin; the backward is again one launch.
    """
    return _apply_rotary_qk(q, k, cos, sin, interleaved, False)
