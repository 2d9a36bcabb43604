"""Tests for the rotary kernel against a float64 torch reference.

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
from rotary.layers import RotaryEmbedding  # noqa: E402

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


# The op is opaque to torch.compile (a custom op), so compiling works on CPU under the interpreter
# too. On CPU inductor spends ~15 s compiling C++ for the surrounding ops per case, so there it
# runs for the NeoX style only and aot_eager (fullgraph tracing, fake tensors, autograd graph)
# covers both styles.
BACKENDS = ["aot_eager", "inductor"]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("interleaved", [False, True], ids=["neox", "gptj"])
def test_torch_compile_fullgraph(interleaved, backend):
    if backend == "inductor" and DEVICE == "cpu" and interleaved:
        pytest.skip("inductor on CPU is slow to compile; the neox case covers it (both run on cuda)")
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
