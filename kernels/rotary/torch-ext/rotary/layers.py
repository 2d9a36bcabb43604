"""Stateless layers (kernel-builder `layers` convention: only `forward`)."""

import torch
from torch import nn

from .functions import apply_rotary, apply_rotary_qk


class RotaryEmbedding(nn.Module):
    """Applies rotary position embedding to x [batch, seqlen, nheads, headdim].

    cos, sin: [seqlen, rotary_dim // 2]. Reads an optional boolean attribute `interleaved`
    (GPT-J style) from the module it is bound to; default GPT-NeoX style.
    """

    has_backward = True
    can_torch_compile = True

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        return apply_rotary(x, cos, sin, interleaved=getattr(self, "interleaved", False))


class RotaryPosEmb(nn.Module):
    """A drop-in for transformers' `apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1)`, the
    function transformers lets kernelize swap as `rotary_pos_emb`: q and k in one launch.

    q, k: [batch, heads, seqlen, headdim] (unsqueeze_dim=1) or [batch, seqlen, heads, headdim]
    (unsqueeze_dim=2), any strides with a unit last one; cos, sin: [1 or batch, seqlen, rotary_dim]
    as transformers' rotary embeddings make them, cat(freqs, freqs) (GPT-NeoX style), so their
    first half is the table. A batch of tables (positions per sequence) folds the batch into the
    sequence. Returns (q_embed, k_embed) in the layout of q and k.
    """

    has_backward = True
    can_torch_compile = True

    def forward(self, q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                unsqueeze_dim: int = 1):
        if unsqueeze_dim not in (1, 2):
            raise ValueError(f"rotary: unsqueeze_dim must be 1 ([batch, heads, seqlen, headdim]) or 2 "
                             f"([batch, seqlen, heads, headdim]), got {unsqueeze_dim}")
        if cos.dim() != 3 or cos.shape != sin.shape:
            raise ValueError(f"rotary: cos and sin must both be [batch, seqlen, rotary_dim], got "
                             f"{tuple(cos.shape)} and {tuple(sin.shape)}")
        # the kernel's layout, [batch, seqlen, heads, headdim]: a view for transformers' own q and k
        q4, k4 = (q.transpose(1, 2), k.transpose(1, 2)) if unsqueeze_dim == 1 else (q, k)
        half = cos.shape[-1] // 2
        if cos.shape[0] == 1:  # one table for the batch (position_ids of batch 1): views, no copy
            out_q, out_k = apply_rotary_qk(q4, k4, cos[0, :, :half], sin[0, :, :half])
        else:
            batch, seqlen = q4.shape[0], q4.shape[1]
            if cos.shape[0] != batch or cos.shape[1] != seqlen:
                raise ValueError(f"rotary: cos/sin {tuple(cos.shape)} do not match q's batch {batch} and "
                                 f"seqlen {seqlen}")
            out_q, out_k = apply_rotary_qk(q4.reshape(1, batch * seqlen, *q4.shape[2:]),
                                           k4.reshape(1, batch * seqlen, *k4.shape[2:]),
                                           cos[..., :half].reshape(batch * seqlen, half),
                                           sin[..., :half].reshape(batch * seqlen, half))
            out_q, out_k = out_q.view(q4.shape), out_k.view(k4.shape)
        return (out_q.transpose(1, 2), out_k.transpose(1, 2)) if unsqueeze_dim == 1 else (out_q, out_k)


# the layer name transformers' default mapping asks a rotary kernel for
apply_rotary_transformers = RotaryPosEmb
