"""Triton kernel for rotary position embedding and its host-side launcher.

One program rotates BLOCK_M positions of one batch element: it loads their cos/sin rows once, keeps
them in registers (fp32, already conjugated) and walks its share of the heads, BLOCK_H heads at a
time, reusing the same rows for every head (the kernel before this one loaded cos/sin again for each
head: issue 47 item 3). With enough positions to fill the GPU a program takes every head of its
positions; with few (decode, short prompts) the heads are split over a second grid axis so the
launch still has programs to spread, and each of those loads the rows once for its share.

The rotation is computed in fp32; the first `rotary_dim` channels of each head are rotated and the
remaining `headdim - rotary_dim` channels are copied unchanged. One launch can rotate two tensors
that share batch, seqlen and headdim (q and k, whose head counts may differ): a program walks its
share of the first tensor's heads, then of the second's, with the same cos/sin rows.
"""

import functools

import torch
import triton
import triton.language as tl

# The kernel is memory-bound: each byte of q/k is read once and written once, and cos/sin once per
# position (once per program, which holds them in registers for all its heads). The sizes only cut
# the work (peers' 32768 positions x 32 q + 8 k heads x 128 channels as the example):
# - a tile, one step of a program's walk over the heads, holds _TILE_ELEMENTS elements (positions x
#   heads x channels) with _NUM_WARPS warps: 16 a thread, two 16-byte vectors of bf16 (the x0 and x1
#   halves). The kernel before this one ran tiles of this size at 85-99 % of the H200's copy
#   bandwidth (2048-8192 elements, 4 or 8 warps, bf16 and fp32, headdim 64-128: 2048 with 4 warps
#   best or within 2 %), so the size is kept;
# - a tile takes up to _HEADS_PER_TILE heads and fills the rest with positions (BLOCK_M), which are
#   what the rows loaded once cover: 4 positions x 4 heads x 128, so a program loads 4 rows and
#   reuses them for 10 steps (8 of q, 2 of k), and the launch has 8192 programs, about 6 waves of an
#   H200 (132 SMs x 9-10 resident programs: ptxas gives the bf16 kernel 48-56 registers a thread), so
#   the last wave's tail is short. Few positions (decode) give the tile more heads, up to _MAX_BLOCK_H;
# - _MIN_PROGRAMS, a wave or so: with fewer position blocks than this the heads are split over the
#   grid's second axis too, down to one tile of heads a program (1 position: 5 programs of 8 heads,
#   as before; 4096 positions: 2 x 1024 programs of 5 steps), so short inputs still spread over the
#   SMs; each program loads its rows once.
# benchmarks/benchmark.py --sweep times other values of these constants on a GPU.
_TILE_ELEMENTS = 2048
_NUM_WARPS = 4
_HEADS_PER_TILE = 4
_MAX_BLOCK_H = 16
_MIN_PROGRAMS = 2048


@triton.jit
def _rotate_heads(
    X,
    OUT,
    x_pos,  # [BLOCK_M] pointers: X at (batch, position, head 0)
    o_pos,  # [BLOCK_M] pointers: OUT at (batch, position, head 0)
    pos_mask,  # [BLOCK_M]
    cos,  # [BLOCK_M, 1, BLOCK_K] fp32, loaded once by the caller
    sin,
    hblock,  # which block of BLOCK_H heads
    nheads,
    half,
    headdim,
    stride_h,
    INTERLEAVED: tl.constexpr,
    HAS_PASS: tl.constexpr,
    BLOCK_H: tl.constexpr,
    BLOCK_K: tl.constexpr,
    BLOCK_P: tl.constexpr,
):
    """Rotate heads [hblock * BLOCK_H, hblock * BLOCK_H + BLOCK_H) of BLOCK_M positions: a
    [BLOCK_M, BLOCK_H, channels] tile, the cos/sin rows broadcast over its heads."""
    head = (hblock * BLOCK_H + tl.arange(0, BLOCK_H)).to(tl.int64)
    row_mask = pos_mask[:, None] & (head < nheads)[None, :]  # [BLOCK_M, BLOCK_H]
    x_row = x_pos[:, None] + head[None, :] * stride_h
    o_row = o_pos[:, None] + head[None, :] * headdim  # outputs are contiguous
    out_ty = OUT.dtype.element_ty
    if INTERLEAVED:
        # GPT-J: channel pairs (2k, 2k+1) rotate together. Load the contiguous span and split it.
        d = tl.arange(0, 2 * BLOCK_K)
        dmask = row_mask[:, :, None] & (d < 2 * half)[None, None, :]
        x = tl.load(x_row[:, :, None] + d[None, None, :], mask=dmask, other=0.0).to(tl.float32)
        x0, x1 = tl.split(tl.reshape(x, [x.shape[0], BLOCK_H, BLOCK_K, 2]))
        o0 = x0 * cos - x1 * sin
        o1 = x0 * sin + x1 * cos
        o = tl.reshape(tl.join(o0, o1), [x.shape[0], BLOCK_H, 2 * BLOCK_K])
        tl.store(o_row[:, :, None] + d[None, None, :], o.to(out_ty), mask=dmask)
    else:
        # GPT-NeoX: channel k rotates with channel k + half.
        k = tl.arange(0, BLOCK_K)
        mask = row_mask[:, :, None] & (k < half)[None, None, :]
        x0 = tl.load(x_row[:, :, None] + k[None, None, :], mask=mask, other=0.0).to(tl.float32)
        x1 = tl.load(x_row[:, :, None] + half + k[None, None, :], mask=mask, other=0.0).to(tl.float32)
        o0 = x0 * cos - x1 * sin
        o1 = x0 * sin + x1 * cos
        tl.store(o_row[:, :, None] + k[None, None, :], o0.to(out_ty), mask=mask)
        tl.store(o_row[:, :, None] + half + k[None, None, :], o1.to(out_ty), mask=mask)

    if HAS_PASS:
        p = 2 * half + tl.arange(0, BLOCK_P)
        pmask = row_mask[:, :, None] & (p < headdim)[None, None, :]
        v = tl.load(x_row[:, :, None] + p[None, None, :], mask=pmask, other=0.0)
        tl.store(o_row[:, :, None] + p[None, None, :], v.to(out_ty), mask=pmask)


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
    blocks_per_program,  # head blocks (A's, then B's, counted together) each program of axis 1 takes
    CONJUGATE: tl.constexpr,
    INTERLEAVED: tl.constexpr,
    HAS_PASS: tl.constexpr,
    HAS_B: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_H: tl.constexpr,  # heads a tile takes, of A and of B alike (one layout for the cos/sin rows)
    BLOCK_K: tl.constexpr,  # >= half, power of two
    BLOCK_P: tl.constexpr,  # >= headdim - 2 * half, power of two
):
    pid_m = tl.program_id(0)
    pid_g = tl.program_id(1)
    pid_b = tl.program_id(2).to(tl.int64)

    pos = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    pos_mask = pos < seqlen
    pos64 = pos.to(tl.int64)

    # The cos/sin rows of these positions: loaded once, used for every head below.
    k = tl.arange(0, BLOCK_K)
    cmask = pos_mask[:, None] & (k < half)[None, :]
    cos = tl.load(COS + pos64[:, None] * stride_cos + k[None, :], mask=cmask, other=1.0).to(tl.float32)
    sin = tl.load(SIN + pos64[:, None] * stride_sin + k[None, :], mask=cmask, other=0.0).to(tl.float32)
    if CONJUGATE:
        sin = -sin
    cos = cos[:, None, :]  # broadcast over a tile's heads
    sin = sin[:, None, :]

    # This program's head blocks: [lo, hi) of A's blocks followed by B's.
    blocks_a = tl.cdiv(nheads_a, BLOCK_H)
    blocks = blocks_a
    if HAS_B:
        blocks = blocks_a + tl.cdiv(nheads_b, BLOCK_H)
    lo = pid_g * blocks_per_program
    hi = tl.minimum(lo + blocks_per_program, blocks)

    x_pos = X_A + pid_b * stride_ab + pos64 * stride_as
    o_pos = OUT_A + (pid_b * seqlen + pos64) * nheads_a * headdim
    for hblock in range(lo, tl.minimum(hi, blocks_a)):
        _rotate_heads(X_A, OUT_A, x_pos, o_pos, pos_mask, cos, sin, hblock, nheads_a, half, headdim,
                      stride_ah, INTERLEAVED, HAS_PASS, BLOCK_H, BLOCK_K, BLOCK_P)
    if HAS_B:
        x_pos_b = X_B + pid_b * stride_bb + pos64 * stride_bs
        o_pos_b = OUT_B + (pid_b * seqlen + pos64) * nheads_b * headdim
        for hblock_b in range(tl.maximum(lo, blocks_a) - blocks_a, hi - blocks_a):
            _rotate_heads(X_B, OUT_B, x_pos_b, o_pos_b, pos_mask, cos, sin, hblock_b, nheads_b, half, headdim,
                          stride_bh, INTERLEAVED, HAS_PASS, BLOCK_H, BLOCK_K, BLOCK_P)


def _unit_last_stride(t: torch.Tensor) -> torch.Tensor:
    return t if t.stride(-1) == 1 else t.contiguous()


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)  # triton.cdiv costs ~1.5 us a call on the host


@functools.lru_cache(maxsize=256)
def _launch_config(
    batch: int, seqlen: int, nheads_a: int, nheads_b: int, half: int, headdim: int, interleaved: bool,
    conjugate: bool,
):
    """(grid, the kernel's blocks_per_program, its constexpr and num_warps keywords) for x_a with
    nheads_a heads and, when nheads_b > 0, x_b with nheads_b."""
    has_b = nheads_b > 0
    block_k = triton.next_power_of_2(half)
    block_p = triton.next_power_of_2(headdim - 2 * half) if headdim > 2 * half else 0
    row_width = max(2 * block_k, block_p)  # a tile's channels per (position, head)
    rows = max(1, _TILE_ELEMENTS // row_width)  # (position, head) rows a tile holds
    # One head block for both tensors, sized on the smaller head count (no rows wasted on k's few
    # heads; one register layout, so the cos/sin rows are loaded once, not once per tensor).
    heads = triton.next_power_of_2(min(nheads_a, nheads_b) if has_b else nheads_a)
    block_m = min(triton.next_power_of_2(seqlen), max(1, rows // min(heads, _HEADS_PER_TILE)))
    block_h = min(heads, _MAX_BLOCK_H, max(1, rows // block_m))
    m_blocks = _cdiv(seqlen, block_m)
    head_blocks = _cdiv(nheads_a, block_h) + (_cdiv(nheads_b, block_h) if has_b else 0)
    # Every head of a position block in one program when those programs alone fill the GPU; else
    # the heads split over axis 1, down to one tile of heads a program.
    groups = min(head_blocks, _cdiv(_MIN_PROGRAMS, m_blocks * batch))
    per_program = _cdiv(head_blocks, groups)
    grid = (m_blocks, _cdiv(head_blocks, per_program), batch)
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
    return grid, per_program, keywords


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
    has_b = x_b is not None
    grid, per_program, keywords = _launch_config(
        batch, seqlen, nheads_a, x_b.shape[2] if has_b else 0, cos.shape[1], headdim, interleaved, conjugate
    )
    if not has_b:
        out_b, x_b = out_a, x_a  # unused by the kernel: any pointers of the right type
    sa, sb = x_a.stride(), x_b.stride()
    args = (out_a, x_a, out_b, x_b, cos, sin, seqlen, nheads_a, x_b.shape[2], cos.shape[1], headdim,
            sa[0], sa[1], sa[2], sb[0], sb[1], sb[2], cos.stride(0), sin.stride(0), per_program)
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
