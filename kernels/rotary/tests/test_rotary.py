"""Tests for the rotary kernel against a float64 torch reference.

apply_rotary_qk (q and k in one launch) is checked against the same reference.

Run by `kbuild test` against a built variant (KBUILD_TEST_DEVICE=cuda|cpu); on CPU the Triton
kernels run under the interpreter (TRITON_INTERPRET=1, which must be set before import).
"""

import os

import pytest
import torch

DEVICE = os.environ.get("KBUILD_TEST_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"

if DEVICE.startswith("cuda") and not torch.cuda.is_available():
    pytest.skip(f"KBUILD_TEST_DEVICE={DEVICE} but no CUDA device is available", allow_module_level=True)
if DEVICE == "cpu" and not INTERPRET:
    pytest.skip(
        "device is cpu: Triton kernels run on CPU only under the interpreter; set TRITON_INTERPRET=1",
        allow_module_level=True,
    )
if DEVICE not in ("cpu",) and not DEVICE.startswith("cuda"):
    pytest.skip(f"rotary is a CUDA (Triton) kernel; device {DEVICE!r} is not supported", allow_module_level=True)

import rotary  # noqa: E402
from rotary.layers import RotaryEmbedding, RotaryPosEmb  # noqa: E402

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
# (atol, rtol) for outputs rounded to dtype from an fp32 computation.
TOL = {
    torch.float32: (1e-5, 1e-5),
    torch.float16: (2e-3, 2e-3),
    torch.bfloat16: (1.6e-2, 1.6e-2),
}
# (headdim, rotary_dim): full, partial with a non-power-of-two rotary_dim // 2.
DIMS = [(32, 32), (40, 24)]
BATCH, SEQLEN, NHEADS = 2, 9, 3


def reference(x, cos, sin, interleaved, conjugate=False):
    """Rotary embedding in float64 with plain torch ops (differentiable in all inputs)."""
    x, cos, sin = x.double(), cos.double(), sin.double()
    seqlen, rotary_dim = x.shape[1], 2 * cos.shape[-1]
    cos = cos[:seqlen, None, :]
    sin = sin[:seqlen, None, :]
    if conjugate:
        sin = -sin
    rot, rest = x[..., :rotary_dim], x[..., rotary_dim:]
    if interleaved:
        x0, x1 = rot[..., 0::2], rot[..., 1::2]
        out = torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1).flatten(-2)
    else:
        x0, x1 = rot.chunk(2, dim=-1)
        out = torch.cat((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1)
    return torch.cat((out, rest), dim=-1)


def make_inputs(dtype, headdim, rotary_dim, table_dtype=None, seqlen_ro=SEQLEN, requires_grad=False):
    x = torch.randn(BATCH, SEQLEN, NHEADS, headdim, device=DEVICE, dtype=dtype)
    angle = torch.rand(seqlen_ro, rotary_dim // 2, device=DEVICE, dtype=torch.float64) * 6.2832
    table_dtype = table_dtype or dtype
    cos, sin = angle.cos().to(table_dtype), angle.sin().to(table_dtype)
    for t in (x, cos, sin):
        t.requires_grad_(requires_grad)
    return x, cos, sin


def assert_close(actual, expected, dtype):
    atol, rtol = TOL[dtype]
    torch.testing.assert_close(actual.double(), expected.double(), atol=atol, rtol=rtol)


@pytest.mark.parametrize("dims", DIMS, ids=lambda d: f"hd{d[0]}-rd{d[1]}")
@pytest.mark.parametrize("interleaved", [False, True], ids=["neox", "gptj"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_forward(dtype, interleaved, dims):
    torch.manual_seed(0)
    x, cos, sin = make_inputs(dtype, *dims)
    out = rotary.apply_rotary(x, cos, sin, interleaved=interleaved)
    assert out.dtype == dtype and out.shape == x.shape and out.device == x.device
    assert_close(out, reference(x, cos, sin, interleaved), dtype)
    # The pass-through channels are copied exactly.
    torch.testing.assert_close(out[..., dims[1] :], x[..., dims[1] :], atol=0, rtol=0)


@pytest.mark.parametrize("dims", DIMS, ids=lambda d: f"hd{d[0]}-rd{d[1]}")
@pytest.mark.parametrize("interleaved", [False, True], ids=["neox", "gptj"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_backward(dtype, interleaved, dims):
    torch.manual_seed(1)
    x, cos, sin = make_inputs(dtype, *dims, requires_grad=True)
    grad = torch.randn(x.shape, device=DEVICE, dtype=dtype)
    out = rotary.apply_rotary(x, cos, sin, interleaved=interleaved)
    gx, gcos, gsin = torch.autograd.grad(out, (x, cos, sin), grad)

    xr, cr, sr = (t.detach().double().requires_grad_() for t in (x, cos, sin))
    rx, rcos, rsin = torch.autograd.grad(reference(xr, cr, sr, interleaved), (xr, cr, sr), grad.double())
    assert gx.dtype == dtype and gcos.dtype == cos.dtype
    assert_close(gx, rx, dtype)
    # Table gradients sum BATCH * NHEADS products: scale the tolerance with that.
    atol, rtol = TOL[dtype]
    torch.testing.assert_close(gcos.double(), rcos, atol=4 * atol, rtol=rtol)
    torch.testing.assert_close(gsin.double(), rsin, atol=4 * atol, rtol=rtol)


@pytest.mark.parametrize("interleaved", [False, True], ids=["neox", "gptj"])
def test_mixed_dtypes_long_table_strided_input(interleaved):
    """bf16 x with fp32 cos/sin longer than seqlen; x is a non-contiguous slice of a qkv tensor."""
    torch.manual_seed(2)
    qkv = torch.randn(BATCH, SEQLEN, 3, NHEADS, 32, device=DEVICE, dtype=torch.bfloat16)
    x = qkv[:, :, 1]
    assert not x.is_contiguous()
    _, cos, sin = make_inputs(torch.float32, 32, 16, seqlen_ro=SEQLEN + 7)
    out = rotary.apply_rotary(x, cos, sin, interleaved=interleaved)
    assert out.dtype == torch.bfloat16
    assert_close(out, reference(x, cos, sin, interleaved), torch.bfloat16)

    x.requires_grad_(False)
    xg = x.detach().clone().requires_grad_()
    cg, sg = cos.clone().requires_grad_(), sin.clone().requires_grad_()
    grad = torch.randn_like(xg)
    gx, gcos, gsin = torch.autograd.grad(rotary.apply_rotary(xg, cg, sg, interleaved), (xg, cg, sg), grad)
    xr, cr, sr = (t.detach().double().requires_grad_() for t in (xg, cg, sg))
    rx, rcos, rsin = torch.autograd.grad(reference(xr, cr, sr, interleaved), (xr, cr, sr), grad.double())
    assert_close(gx, rx, torch.bfloat16)
    assert gcos.shape == cos.shape and gcos[SEQLEN:].abs().max() == 0
    torch.testing.assert_close(gcos.double(), rcos, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(gsin.double(), rsin, atol=1e-4, rtol=1e-4)


def test_inverse_rotation_round_trip():
    torch.manual_seed(3)
    x, cos, sin = make_inputs(torch.float32, 40, 24)
    out = rotary.apply_rotary(x, cos, sin)
    back = rotary.ops.apply_rotary(out, cos, sin, False, True)  # conjugate: rotate by -angle
    torch.testing.assert_close(back, x, atol=1e-5, rtol=1e-5)


def test_empty_and_bad_shapes():
    x, cos, sin = make_inputs(torch.float32, 32, 32)
    empty = rotary.apply_rotary(x[:0], cos, sin)
    assert empty.shape == (0, SEQLEN, NHEADS, 32)
    with pytest.raises(ValueError, match="rotary_dim"):
        rotary.apply_rotary(x[..., :16], cos, sin)
    with pytest.raises(ValueError, match="positions"):
        rotary.apply_rotary(x, cos[:4], sin[:4])


@pytest.mark.parametrize("interleaved", [False, True], ids=["neox", "gptj"])
def test_opcheck(interleaved):
    torch.manual_seed(4)
    x, cos, sin = make_inputs(torch.float32, 40, 24, requires_grad=True)
    torch.library.opcheck(rotary.ops.apply_rotary.default, (x, cos, sin, interleaved, False))
    x, cos, sin = make_inputs(torch.float16, 32, 32)
    torch.library.opcheck(rotary.ops.apply_rotary.default, (x, cos, sin, interleaved, True))


def test_namespace():
    name = rotary.add_op_namespace_prefix("apply_rotary")
    namespace, _, op = name.partition("::")
    assert op == "apply_rotary"
    assert getattr(torch.ops, namespace).apply_rotary is rotary.ops.apply_rotary


def test_layer():
    torch.manual_seed(5)
    assert RotaryEmbedding.has_backward and RotaryEmbedding.can_torch_compile
    x, cos, sin = make_inputs(torch.float16, 40, 24)
    layer = RotaryEmbedding()
    torch.testing.assert_close(layer(x, cos, sin), rotary.apply_rotary(x, cos, sin), atol=0, rtol=0)
    layer.interleaved = True
    assert_close(layer(x, cos, sin), reference(x, cos, sin, True), torch.float16)


def transformers_reference(q, k, cos, sin, unsqueeze_dim):
    """transformers' apply_rotary_pos_emb (rotate_half form), in float64."""
    def rotate_half(x):
        return torch.cat((-x[..., x.shape[-1] // 2:], x[..., : x.shape[-1] // 2]), dim=-1)

    cos, sin = cos.double().unsqueeze(unsqueeze_dim), sin.double().unsqueeze(unsqueeze_dim)
    q, k = q.double(), k.double()
    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


def transformers_tables(positions, headdim, dtype):
    """cos, sin [batch, seqlen, headdim] as transformers' rotary embeddings make them: cat(freqs, freqs)."""
    inv_freq = 1.0 / (10000 ** (torch.arange(0, headdim, 2, device=DEVICE, dtype=torch.float64) / headdim))
    freqs = positions.double()[..., None] * inv_freq
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


@pytest.mark.parametrize("per_sequence", [False, True], ids=["one-table", "table-per-sequence"])
@pytest.mark.parametrize("unsqueeze_dim", [1, 2])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_transformers_layer(dtype, unsqueeze_dim, per_sequence):
    """RotaryPosEmb against transformers' apply_rotary_pos_emb, forward and backward, with GQA
    heads and q, k laid out as transformers makes them (a transpose of [batch, seqlen, heads, dim])."""
    torch.manual_seed(11)
    batch, seqlen, heads_q, heads_k, headdim = 2, 7, 4, 2, 32
    q = torch.randn(batch, seqlen, heads_q, headdim, device=DEVICE, dtype=dtype)
    k = torch.randn(batch, seqlen, heads_k, headdim, device=DEVICE, dtype=dtype)
    if unsqueeze_dim == 1:
        q, k = q.transpose(1, 2), k.transpose(1, 2)
    q.requires_grad_(True)
    k.requires_grad_(True)
    positions = torch.arange(seqlen, device=DEVICE)[None]
    if per_sequence:  # left padding: each sequence starts elsewhere
        positions = positions + torch.tensor([[0], [3]], device=DEVICE)
    cos, sin = transformers_tables(positions, headdim, dtype)
    assert RotaryPosEmb.has_backward and RotaryPosEmb.can_torch_compile
    out_q, out_k = RotaryPosEmb()(q, k, cos, sin, unsqueeze_dim)
    ref_q, ref_k = transformers_reference(q, k, cos, sin, unsqueeze_dim)
    assert out_q.shape == q.shape and out_k.shape == k.shape
    assert_close(out_q, ref_q, dtype)
    assert_close(out_k, ref_k, dtype)
    grad_q, grad_k = torch.randn_like(out_q), torch.randn_like(out_k)
    got = torch.autograd.grad((out_q, out_k), (q, k), (grad_q, grad_k))
    want = torch.autograd.grad((ref_q, ref_k), (q, k), (grad_q.double(), grad_k.double()))
    for g, w in zip(got, want):
        assert_close(g, w, dtype)


def test_transformers_layer_refuses_what_it_cannot_rotate():
    q = torch.randn(2, 4, 5, 16, device=DEVICE)
    cos, sin = transformers_tables(torch.arange(5, device=DEVICE)[None], 16, torch.float32)
    with pytest.raises(ValueError, match="unsqueeze_dim must be 1"):
        RotaryPosEmb()(q, q, cos, sin, 3)
    with pytest.raises(ValueError, match="cos and sin must both be"):
        RotaryPosEmb()(q, q, cos[0], sin[0])
    with pytest.raises(ValueError, match="do not match q's batch 2 and seqlen 5"):
        RotaryPosEmb()(q, q, cos.expand(3, -1, -1), sin.expand(3, -1, -1))


def test_transformers_layer_name():
    """The name transformers' default mapping asks a rotary kernel for."""
    assert rotary.layers.apply_rotary_transformers is RotaryPosEmb


# The op is opaque to torch.compile (a custom op), so compiling works on CPU under the interpreter
# too. On CPU inductor spends ~15 s compiling C++ for the surrounding ops per case, so there it
# runs for the NeoX style only and aot_eager (fullgraph tracing, fake tensors, autograd graph)
# covers both styles.
BACKENDS = ["aot_eager", "inductor"]


def skip_slow_cpu_inductor(backend, interleaved):
    if backend == "inductor" and DEVICE == "cpu" and interleaved:
        pytest.skip("inductor on CPU is slow to compile; the neox case covers it (both run on cuda)")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("interleaved", [False, True], ids=["neox", "gptj"])
def test_torch_compile_fullgraph(interleaved, backend):
    skip_slow_cpu_inductor(backend, interleaved)
    torch.manual_seed(6)
    torch._dynamo.reset()
    x, cos, sin = make_inputs(torch.bfloat16, 40, 24, requires_grad=True)
    layer = RotaryEmbedding()
    layer.interleaved = interleaved

    def f(x, cos, sin):
        return (layer(x, cos, sin) * 2).float().square().sum()

    compiled = torch.compile(f, fullgraph=True, backend=backend)
    loss = compiled(x, cos, sin)
    grads = torch.autograd.grad(loss, (x, cos, sin))
    eager_loss = f(x, cos, sin)
    eager_grads = torch.autograd.grad(eager_loss, (x, cos, sin))
    torch.testing.assert_close(loss, eager_loss, atol=1e-2, rtol=1e-3)
    for g, e in zip(grads, eager_grads):
        torch.testing.assert_close(g, e, atol=5e-2, rtol=2e-2)


# ---- apply_rotary_qk: q and k in one op call and one launch ------------------------------------

QK_HEADS = [(3, 3), (4, 1), (6, 2)]  # (q heads, k heads): MHA, MQA, GQA


def make_qk(dtype, headdim, rotary_dim, heads, table_dtype=None, seqlen_ro=SEQLEN, requires_grad=False):
    q = torch.randn(BATCH, SEQLEN, heads[0], headdim, device=DEVICE, dtype=dtype)
    k = torch.randn(BATCH, SEQLEN, heads[1], headdim, device=DEVICE, dtype=dtype)
    _, cos, sin = make_inputs(dtype, headdim, rotary_dim, table_dtype, seqlen_ro)
    for t in (q, k, cos, sin):
        t.requires_grad_(requires_grad)
    return q, k, cos, sin


@pytest.mark.parametrize("heads", QK_HEADS, ids=lambda h: f"hq{h[0]}-hk{h[1]}")
@pytest.mark.parametrize("dims", DIMS, ids=lambda d: f"hd{d[0]}-rd{d[1]}")
@pytest.mark.parametrize("interleaved", [False, True], ids=["neox", "gptj"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_qk_forward(dtype, interleaved, dims, heads):
    torch.manual_seed(7)
    q, k, cos, sin = make_qk(dtype, *dims, heads)
    q_out, k_out = rotary.apply_rotary_qk(q, k, cos, sin, interleaved=interleaved)
    for out, x in ((q_out, q), (k_out, k)):
        assert out.dtype == dtype and out.shape == x.shape and out.is_contiguous()
        assert_close(out, reference(x, cos, sin, interleaved), dtype)
        torch.testing.assert_close(out[..., dims[1] :], x[..., dims[1] :], atol=0, rtol=0)
        # The same values as the one-tensor op, bit for bit (same fp32 arithmetic).
        torch.testing.assert_close(out, rotary.apply_rotary(x, cos, sin, interleaved), atol=0, rtol=0)


@pytest.mark.parametrize("interleaved", [False, True], ids=["neox", "gptj"])
def test_qk_strided_inputs_long_fp32_table(interleaved):
    """q and k as non-contiguous slices of one qkv projection (GQA), bf16, fp32 tables longer
    than seqlen."""
    torch.manual_seed(8)
    hq, hk, hd = 4, 2, 32
    qkv = torch.randn(BATCH, SEQLEN, (hq + 2 * hk) * hd, device=DEVICE, dtype=torch.bfloat16)
    q = qkv[..., : hq * hd].unflatten(-1, (hq, hd))
    k = qkv[..., hq * hd : (hq + hk) * hd].unflatten(-1, (hk, hd))
    assert not q.is_contiguous() and not k.is_contiguous()
    _, cos, sin = make_inputs(torch.float32, hd, 16, seqlen_ro=SEQLEN + 5)
    q_out, k_out = rotary.apply_rotary_qk(q, k, cos, sin, interleaved)
    assert_close(q_out, reference(q, cos, sin, interleaved), torch.bfloat16)
    assert_close(k_out, reference(k, cos, sin, interleaved), torch.bfloat16)
    # A k whose last dimension is strided is made unit-stride, not misread.
    k_t = torch.randn(BATCH, SEQLEN, hd, hk, device=DEVICE, dtype=torch.bfloat16).transpose(-1, -2)
    _, k_t_out = rotary.apply_rotary_qk(q, k_t, cos, sin, interleaved)
    assert_close(k_t_out, reference(k_t, cos, sin, interleaved), torch.bfloat16)


@pytest.mark.parametrize("heads", [(4, 1), (6, 2)], ids=lambda h: f"hq{h[0]}-hk{h[1]}")
@pytest.mark.parametrize("interleaved", [False, True], ids=["neox", "gptj"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
def test_qk_backward(dtype, interleaved, heads):
    torch.manual_seed(9)
    q, k, cos, sin = make_qk(dtype, 40, 24, heads, seqlen_ro=SEQLEN + 3, requires_grad=True)
    gq_out, gk_out = torch.randn_like(q), torch.randn_like(k)
    q_out, k_out = rotary.apply_rotary_qk(q, k, cos, sin, interleaved)
    grads = torch.autograd.grad((q_out, k_out), (q, k, cos, sin), (gq_out, gk_out))

    leaves = [t.detach().double().requires_grad_() for t in (q, k, cos, sin)]
    qr, kr, cr, sr = leaves
    ref_out = (reference(qr, cr, sr, interleaved), reference(kr, cr, sr, interleaved))
    ref = torch.autograd.grad(ref_out, leaves, (gq_out.double(), gk_out.double()))
    assert_close(grads[0], ref[0], dtype)
    assert_close(grads[1], ref[1], dtype)
    # Table gradients sum BATCH * (q heads + k heads) products: scale the tolerance with that.
    atol, rtol = TOL[dtype]
    for g, r, t in zip(grads[2:], ref[2:], (cos, sin)):
        assert g.dtype == t.dtype and g.shape == t.shape and g[SEQLEN:].abs().max() == 0
        torch.testing.assert_close(g.double(), r, atol=8 * atol, rtol=rtol)


def test_qk_empty_and_bad_shapes():
    q, k, cos, sin = make_qk(torch.float32, 32, 32, (4, 2))
    q_out, k_out = rotary.apply_rotary_qk(q[:0], k[:0], cos, sin)
    assert q_out.shape == (0, SEQLEN, 4, 32) and k_out.shape == (0, SEQLEN, 2, 32)
    q_out, k_out = rotary.apply_rotary_qk(q, k[:, :, :0], cos, sin)  # no k heads: q alone
    assert k_out.shape == (BATCH, SEQLEN, 0, 32)
    assert_close(q_out, reference(q, cos, sin, False), torch.float32)
    with pytest.raises(ValueError, match="share batch, seqlen and headdim"):
        rotary.apply_rotary_qk(q, k[:, :4], cos, sin)
    with pytest.raises(TypeError, match="one dtype"):
        rotary.apply_rotary_qk(q, k.half(), cos, sin)
    with pytest.raises(ValueError, match="rotary_dim"):
        rotary.apply_rotary_qk(q[..., :16], k[..., :16], cos, sin)


@pytest.mark.parametrize("interleaved", [False, True], ids=["neox", "gptj"])
def test_qk_opcheck(interleaved):
    torch.manual_seed(11)
    q, k, cos, sin = make_qk(torch.float32, 40, 24, (4, 2), requires_grad=True)
    torch.library.opcheck(rotary.ops.apply_rotary_qk.default, (q, k, cos, sin, interleaved, False))
    q, k, cos, sin = make_qk(torch.float16, 32, 32, (3, 3))
    torch.library.opcheck(rotary.ops.apply_rotary_qk.default, (q, k, cos, sin, interleaved, True))


# ---- how a launch cuts the work: a program walks the heads of its positions ---------------------
# A program loads the cos/sin rows of its positions once and walks heads with them: every head of q
# then k when there are positions enough to fill the GPU, else a share (down to one tile of heads).
# The small inputs here get one tile a program; these tests make the kernel take the other cuts too
# (rotary.kernel's _MIN_PROGRAMS, the position blocks below which heads are split).

# (dtype, (headdim, rotary_dim)): headdims not a power of two; half 48, and 24 with 32 channels passed
# through. One dtype each: the cut is dtype-blind, and each case compiles several variants on a GPU.
WALK_CASES = [(torch.bfloat16, (96, 96)), (torch.float32, (80, 48))]


@pytest.fixture
def min_programs(monkeypatch):
    """Set the kernel's _MIN_PROGRAMS for one test; its launch configurations are cached, so they are
    dropped on the way in and out."""
    kernel = rotary.kernel

    def set_to(value):
        monkeypatch.setattr(kernel, "_MIN_PROGRAMS", value)
        kernel._launch_config.cache_clear()

    kernel._launch_config.cache_clear()
    yield set_to
    monkeypatch.undo()
    kernel._launch_config.cache_clear()


@pytest.mark.parametrize("walk", ["every-head", "two-shares"])
@pytest.mark.parametrize("interleaved", [False, True], ids=["neox", "gptj"])
@pytest.mark.parametrize("case", WALK_CASES, ids=lambda c: f"{c[0]}-hd{c[1][0]}-rd{c[1][1]}")
def test_qk_head_walk(case, interleaved, walk, min_programs):
    """every-head: one program per position block walks all of q's heads then k's with the rows it
    loaded once (what long inputs get); two-shares: two programs split a position block's heads, the
    second taking q's last heads and k's. The same values as one tile of heads a program, bit for
    bit, and as the reference; q alone, and the conjugate (the backward's), too."""
    dtype, dims = case
    torch.manual_seed(13)
    heads = (20, 5)  # more q heads than a tile takes; neither count a power of two
    q, k, cos, sin = make_qk(dtype, *dims, heads)

    def outputs():
        return [*rotary.ops.apply_rotary_qk(q, k, cos, sin, interleaved, False),
                *rotary.ops.apply_rotary_qk(q, k, cos, sin, interleaved, True),
                rotary.ops.apply_rotary(q, cos, sin, interleaved, False)]

    one_tile = outputs()
    grid, per_program, keywords = rotary.kernel._launch_config(BATCH, SEQLEN, *heads, dims[1] // 2, dims[0],
                                                               interleaved, False)
    q_blocks = -(-heads[0] // keywords["BLOCK_H"])
    head_blocks = q_blocks + -(-heads[1] // keywords["BLOCK_H"])
    assert grid[1] == head_blocks and per_program == 1
    min_programs(1 if walk == "every-head" else 2 * grid[0] * grid[2])
    grid, per_program, _ = rotary.kernel._launch_config(BATCH, SEQLEN, *heads, dims[1] // 2, dims[0],
                                                        interleaved, False)
    if walk == "every-head":
        assert grid[1] == 1 and per_program == head_blocks
    else:
        assert grid[1] == 2 and per_program < q_blocks < 2 * per_program
    walked = outputs()
    for got, want in zip(walked, one_tile):
        torch.testing.assert_close(got, want, atol=0, rtol=0)
    for got, x, conjugate in zip(walked, (q, k, q, k, q), (False, False, True, True, False)):
        assert_close(got, reference(x, cos, sin, interleaved, conjugate), dtype)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("interleaved", [False, True], ids=["neox", "gptj"])
def test_qk_torch_compile_fullgraph(interleaved, backend):
    skip_slow_cpu_inductor(backend, interleaved)
    torch.manual_seed(12)
    torch._dynamo.reset()
    q, k, cos, sin = make_qk(torch.bfloat16, 40, 24, (4, 2), requires_grad=True)

    def f(q, k, cos, sin):
        q_out, k_out = rotary.apply_rotary_qk(q, k, cos, sin, interleaved)
        return (q_out * 2).float().square().sum() + k_out.float().sum()

    compiled = torch.compile(f, fullgraph=True, backend=backend)
    loss = compiled(q, k, cos, sin)
    grads = torch.autograd.grad(loss, (q, k, cos, sin))
    eager_loss = f(q, k, cos, sin)
    eager_grads = torch.autograd.grad(eager_loss, (q, k, cos, sin))
    torch.testing.assert_close(loss, eager_loss, atol=1e-2, rtol=1e-3)
    for g, e in zip(grads, eager_grads):
        torch.testing.assert_close(g, e, atol=5e-2, rtol=2e-2)
