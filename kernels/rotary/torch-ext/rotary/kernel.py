"""Triton kernel for rotary position embedding and its host-side launcher.

One program rotates a tile of BLOCK_M positions x BLOCK_H heads of one batch element. The
rotation is computed in fp32; the first `rotary_dim` channels of each head are rotated and the
remaining `headdim - rotary_dim` channels are copied unchanged. One launch can rotate two tensors
that share batch, seqlen and headdim (q and k, whose head counts may differ): the head-block grid
axis covers the first tensor's heads, then the second's.
"""

import functools

import torch
import triton
import triton.language as tl

# Elements (rows x channels) one program handles, and its warps. On an H200 (CUDA graphs, bf16
# and fp32, headdim 64-128) every tile of 2048-8192 with 4 or 8 warps ran at 85-99 % of the
# device-to-device copy bandwidth; 2048 with 4 warps was best or within 2 % of it.
_TILE_ELEMENTS = 2048
_MAX_BLOCK_H = 16
_NUM_WARPS = 4


@triton.jit
def _rotary_kernel(
    OUT_A,  # outputs are contiguous [batch, seqlen, nheads, headdim]
    X_A,
    OUT_B,  # the second tensor (k); ignored unless HAS_B
    X_B,
    COS,
    SIN,
    seqlen,
    nheads_a,
    nheads_b,
    half,  # rotary_dim // 2
    headdim,
    stride_ab,
    stride_as,
    stride_ah,
    stride_bb,
    stride_bs,
    stride_bh,
    stride_cos,
    stride_sin,
    CONJUGATE: tl.constexpr,
    INTERLEAVED: tl.constexpr,
    HAS_PASS: tl.constexpr,
    HAS_B: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_H: tl.constexpr,
    BLOCK_K: tl.constexpr,  # >= half, power of two
    BLOCK_P: tl.constexpr,  # >= headdim - 2 * half, power of two
):
    pid_m = tl.program_id(0)
    pid_h = tl.program_id(1)
    pid_b = tl.program_id(2).to(tl.int64)

    # Head blocks [0, cdiv(nheads_a, BLOCK_H)) belong to A, the rest to B. Only the pointers
    # branch: integer arguments equal to 1 are specialized to constants, which an `if` cannot merge
    # with a runtime value, so the integers are selected with tl.where.
    X = X_A
    OUT = OUT_A
    nheads = nheads_a
    stride_xb = stride_ab
    stride_xs = stride_as
    stride_xh = stride_ah
    if HAS_B:
        blocks_a = tl.cdiv(nheads_a, BLOCK_H)
        is_b = pid_h >= blocks_a
        if is_b:
            X = X_B
            OUT = OUT_B
        nheads = tl.where(is_b, nheads_b, nheads_a)
        stride_xb = tl.where(is_b, stride_bb, stride_ab)
        stride_xs = tl.where(is_b, stride_bs, stride_as)
        stride_xh = tl.where(is_b, stride_bh, stride_ah)
        pid_h = tl.where(is_b, pid_h - blocks_a, pid_h)

    rows = tl.arange(0, BLOCK_M * BLOCK_H)
    pos = pid_m * BLOCK_M + rows // BLOCK_H
    head = pid_h * BLOCK_H + rows % BLOCK_H
    row_mask = (pos < seqlen) & (head < nheads)
    pos64 = pos.to(tl.int64)
    head64 = head.to(tl.int64)
    x_row = X + pid_b * stride_xb + pos64 * stride_xs + head64 * stride_xh
    o_row = OUT + ((pid_b * seqlen + pos64) * nheads + head64) * headdim

    k = tl.arange(0, BLOCK_K)
    mask = row_mask[:, None] & (k < half)[None, :]
    cos = tl.load(COS + pos64[:, None] * stride_cos + k[None, :], mask=mask, other=1.0)
    sin = tl.load(SIN + pos64[:, None] * stride_sin + k[None, :], mask=mask, other=0.0)
    cos = cos.to(tl.float32)
    sin = sin.to(tl.float32)
    if CONJUGATE:
        sin = -sin

    out_ty = OUT.dtype.element_ty
    if INTERLEAVED:
        # GPT-J: channel pairs (2k, 2k+1) rotate together. Load the contiguous span and split it.
        d = tl.arange(0, 2 * BLOCK_K)
        dmask = row_mask[:, None] & (d < 2 * half)[None, :]
        x = tl.load(x_row[:, None] + d[None, :], mask=dmask, other=0.0).to(tl.float32)
        x0, x1 = tl.split(tl.reshape(x, [BLOCK_M * BLOCK_H, BLOCK_K, 2]))
        o0 = x0 * cos - x1 * sin
        o1 = x0 * sin + x1 * cos
        o = tl.reshape(tl.join(o0, o1), [BLOCK_M * BLOCK_H, 2 * BLOCK_K])
        tl.store(o_row[:, None] + d[None, :], o.to(out_ty), mask=dmask)
    else:
        # GPT-NeoX: channel k rotates with channel k + half.
        x0 = tl.load(x_row[:, None] + k[None, :], mask=mask, other=0.0).to(tl.float32)
        x1 = tl.load(x_row[:, None] + half + k[None, :], mask=mask, other=0.0).to(tl.float32)
        o0 = x0 * cos - x1 * sin
        o1 = x0 * sin + x1 * cos
        tl.store(o_row[:, None] + k[None, :], o0.to(out_ty), mask=mask)
        tl.store(o_row[:, None] + half + k[None, :], o1.to(out_ty), mask=mask)

    if HAS_PASS:
        p = 2 * half + tl.arange(0, BLOCK_P)
        pmask = row_mask[:, None] & (p < headdim)[None, :]
        v = tl.load(x_row[:, None] + p[None, :], mask=pmask, other=0.0)
        tl.store(o_row[:, None] + p[None, :], v.to(out_ty), mask=pmask)


def _unit_last_stride(t: torch.Tensor) -> torch.Tensor:
    return t if t.stride(-1) == 1 else t.contiguous()


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)  # triton.cdiv costs ~1.5 us a call on the host


@functools.lru_cache(maxsize=256)
def _launch_config(
    seqlen: int, nheads: int, half: int, headdim: int, interleaved: bool, conjugate: bool, has_b: bool
):
    """(BLOCK_M, BLOCK_H, the kernel's constexpr and num_warps keywords). nheads is the smaller head
    count when two tensors share the launch, so the tile wastes no rows on the smaller one."""
    block_k = triton.next_power_of_2(half)
    block_p = triton.next_power_of_2(headdim - 2 * half) if headdim > 2 * half else 0
    row_width = max(2 * block_k, block_p)
    block_h = min(triton.next_power_of_2(nheads), _MAX_BLOCK_H, max(1, _TILE_ELEMENTS // row_width))
    block_m = min(triton.next_power_of_2(seqlen), max(1, _TILE_ELEMENTS // (row_width * block_h)))
    keywords = dict(
        CONJUGATE=conjugate,
        INTERLEAVED=interleaved,
        HAS_PASS=block_p > 0,
        HAS_B=has_b,
        BLOCK_M=block_m,
        BLOCK_H=block_h,
        BLOCK_K=block_k,
        BLOCK_P=max(block_p, 1),
        num_warps=_NUM_WARPS,
    )
    return block_m, block_h, keywords


def _launch(grid, args, keywords, device: torch.device) -> None:
    # Triton launches on the current CUDA device: switch only when the tensors live on another
    # (entering torch.cuda.device costs more than the rest of the host path).
    if device.type == "cuda" and device.index != torch.cuda.current_device():
        with torch.cuda.device(device):
            _rotary_kernel[grid](*args, **keywords)
    else:
        _rotary_kernel[grid](*args, **keywords)


def _rotate(out_a, x_a, out_b, x_b, cos, sin, interleaved: bool, conjugate: bool) -> None:
    """Rotate x_a into out_a and, when x_b is given, x_b into out_b, in one launch. Shapes are
    checked by the caller; the x have no zero-size dimension and their last stride is 1."""
    batch, seqlen, nheads_a, headdim = x_a.shape
    half = cos.shape[1]
    has_b = x_b is not None
    nheads_b = x_b.shape[2] if has_b else 0
    block_m, block_h, keywords = _launch_config(
        seqlen, min(nheads_a, nheads_b) if has_b else nheads_a, half, headdim, interleaved, conjugate, has_b
    )
    if not has_b:
        out_b, x_b = out_a, x_a  # unused by the kernel: any pointers of the right type
    grid = (_cdiv(seqlen, block_m), _cdiv(nheads_a, block_h) + _cdiv(nheads_b, block_h), batch)
    sa, sb = x_a.stride(), x_b.stride()
    args = (out_a, x_a, out_b, x_b, cos, sin, seqlen, nheads_a, nheads_b, half, headdim,
            sa[0], sa[1], sa[2], sb[0], sb[1], sb[2], cos.stride(0), sin.stride(0))
    _launch(grid, args, keywords, x_a.device)


def _new_out(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x, memory_format=torch.contiguous_format)  # ~2x cheaper than torch.empty


def rotary_forward(
    x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, interleaved: bool, conjugate: bool
) -> torch.Tensor:
    """Launch the kernel on x. Shapes are checked by the caller; returns a new contiguous tensor."""
    out = _new_out(x)
    if out.numel():
        _rotate(out, _unit_last_stride(x), None, None, _unit_last_stride(cos), _unit_last_stride(sin),
                interleaved, conjugate)
    return out


def rotary_forward_qk(
    q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, interleaved: bool, conjugate: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """Launch the kernel once for q and k (same batch, seqlen, headdim and dtype; head counts may
    differ). Shapes are checked by the caller; returns two new contiguous tensors."""
    q_out, k_out = _new_out(q), _new_out(k)
    live = [(o, _unit_last_stride(x)) for o, x in ((q_out, q), (k_out, k)) if o.numel()]
    if live:
        (out_a, x_a), (out_b, x_b) = live[0], (live[1] if len(live) == 2 else (None, None))
        _rotate(out_a, x_a, out_b, x_b, _unit_last_stride(cos), _unit_last_stride(sin), interleaved, conjugate)
    return q_out, k_out
