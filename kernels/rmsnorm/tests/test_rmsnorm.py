"""rmsnorm against a float64 PyTorch reference: forward, backward, opcheck, torch.compile, layers.

Runs on KBUILD_TEST_DEVICE (set by `kbuild test`; default cuda when available, else cpu).
"""

import os
import types

import pytest
import torch
from torch import nn

import rmsnorm
from rmsnorm.layers import FusedAddRMSNorm, RMSNorm

DEVICE = os.environ.get("KBUILD_TEST_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
# Skip each test (not the module), so pytest still collects them and exits 0.
pytestmark = pytest.mark.skipif(
    DEVICE == "cuda" and not torch.cuda.is_available(),
    reason="KBUILD_TEST_DEVICE=cuda but no CUDA GPU is available",
)

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
# (rtol, atol): the kernels accumulate in float32 and round once; atol is scaled by max |expected|.
TOLERANCES = {
    torch.float32: (1e-5, 1e-5),
    torch.float16: (2e-3, 2e-3),
    torch.bfloat16: (1.6e-2, 1.6e-2),
}

# Hidden sizes cover: packs of 16 bytes (multiples of 8), odd sizes (one element per thread),
# tiny rows (one warp, several rows per block) and rows long enough to be read twice.
SHAPES = [(1, 8), (7, 37), (4, 5, 64), (2, 3, 4, 24), (16, 1000), (3, 4096), (5, 4095)]
if DEVICE == "cuda":
    SHAPES += [(4096, 1024), (20000, 64), (257, 8192), (9, 17000), (3, 40000), (2, 65537)]
EPS = 1e-6


def _seeded(seed: int) -> torch.Generator:
    return torch.Generator(device="cpu").manual_seed(seed)


def _randn(shape, dtype, gen, scale=1.0):
    return (torch.randn(shape, generator=gen, dtype=torch.float32) * scale).to(DEVICE, dtype)


def _assert_close(actual, expected, dtype, factor=1.0):
    rtol, atol = TOLERANCES[dtype]
    scale = max(expected.abs().max().item(), 1.0) if expected.numel() else 1.0
    torch.testing.assert_close(
        actual.double(), expected, rtol=rtol * factor, atol=atol * factor * scale
    )


def _ref_rms_norm(x, w, eps):
    x = x.double()
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w.double()


def _ref_grads(x, w, grad_out, eps):
    xd = x.detach().double().requires_grad_()
    wd = w.detach().double().requires_grad_()
    out = _ref_rms_norm(xd, wd, eps)
    out.backward(grad_out.double())
    return out.detach(), xd.grad, wd.grad


def _inputs(shape, dtype, seed):
    gen = _seeded(seed)
    x = _randn(shape, dtype, gen, scale=2.0)
    w = _randn(shape[-1:], dtype, gen) + 1.0
    g = _randn(shape, dtype, gen)
    return x, w, g


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_rms_norm_forward_backward(shape, dtype):
    x, w, g = _inputs(shape, dtype, seed=hash(shape) % 1000)
    x.requires_grad_()
    w.requires_grad_()
    out = rmsnorm.rms_norm(x, w, EPS)
    out.backward(g)
    ref_out, ref_gx, ref_gw = _ref_grads(x, w, g, EPS)
    assert out.dtype == dtype and out.shape == x.shape
    _assert_close(out, ref_out, dtype)
    _assert_close(x.grad, ref_gx, dtype)
    _assert_close(w.grad, ref_gw, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(7, 37), (3, 4, 64), (16, 1000)] + SHAPES[7:], ids=str)
def test_fused_add_rms_norm_forward_backward(shape, dtype):
    x, w, g = _inputs(shape, dtype, seed=1 + hash(shape) % 1000)
    gen = _seeded(2)
    residual = _randn(shape, dtype, gen)
    g_res = _randn(shape, dtype, gen)
    x.requires_grad_()
    residual.requires_grad_()
    w.requires_grad_()
    out, residual_out = rmsnorm.fused_add_rms_norm(x, residual, w, EPS)
    torch.autograd.backward([out, residual_out], [g, g_res])

    summed = x.detach() + residual.detach()  # rounded to dtype, as the kernel does
    torch.testing.assert_close(residual_out, summed, rtol=0, atol=0)
    ref_out, ref_gs, ref_gw = _ref_grads(summed, w, g, EPS)
    ref_gs = ref_gs + g_res.double()
    _assert_close(out, ref_out, dtype)
    _assert_close(x.grad, ref_gs, dtype)
    _assert_close(residual.grad, ref_gs, dtype)
    _assert_close(w.grad, ref_gw, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_fused_add_rms_norm_only_normed_output_used(dtype):
    x, w, g = _inputs((6, 48), dtype, seed=3)
    residual = _randn((6, 48), dtype, _seeded(4)).requires_grad_()
    x.requires_grad_()
    out, _ = rmsnorm.fused_add_rms_norm(x, residual, w, EPS)
    out.backward(g)
    _, ref_gs, _ = _ref_grads(x.detach() + residual.detach(), w, g, EPS)
    _assert_close(x.grad, ref_gs, dtype)
    _assert_close(residual.grad, ref_gs, dtype)


def test_non_contiguous_input_and_grad():
    gen = _seeded(5)
    xt = _randn((64, 24), torch.float32, gen).t().requires_grad_()  # (24, 64), strided
    w = (_randn((64,), torch.float32, gen) + 1.0).requires_grad_()
    g = _randn((64, 24), torch.float32, gen).t()
    assert not xt.is_contiguous() and not g.is_contiguous()
    out = rmsnorm.rms_norm(xt, w, EPS)
    out.backward(g)
    ref_out, ref_gx, ref_gw = _ref_grads(xt, w, g, EPS)
    _assert_close(out, ref_out, torch.float32)
    _assert_close(xt.grad, ref_gx, torch.float32)
    _assert_close(w.grad, ref_gw, torch.float32)


def test_empty_rows():
    x = torch.empty((0, 16), device=DEVICE).requires_grad_()
    w = torch.ones(16, device=DEVICE, requires_grad=True)
    out = rmsnorm.rms_norm(x, w)
    assert out.shape == (0, 16)
    out.sum().backward()
    assert torch.equal(w.grad, torch.zeros_like(w))


def test_bad_inputs_raise():
    x = torch.randn(4, 8, device=DEVICE)
    with pytest.raises(RuntimeError, match="weight must have shape"):
        rmsnorm.rms_norm(x, torch.ones(7, device=DEVICE))
    with pytest.raises(RuntimeError, match="dtype"):
        rmsnorm.rms_norm(x, torch.ones(8, device=DEVICE, dtype=torch.float16))
    with pytest.raises(RuntimeError, match="float32, float16 or bfloat16"):
        rmsnorm.rms_norm(x.double(), torch.ones(8, device=DEVICE, dtype=torch.float64))
    with pytest.raises(RuntimeError, match="residual must have the shape"):
        rmsnorm.fused_add_rms_norm(x, torch.randn(4, 4, device=DEVICE), torch.ones(8, device=DEVICE))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_opcheck(dtype):
    x, w, g = _inputs((3, 5, 40), dtype, seed=6)
    residual = _randn((3, 5, 40), dtype, _seeded(7))
    ops = rmsnorm.ops
    x_rg, w_rg, r_rg = (t.clone().requires_grad_() for t in (x, w, residual))
    torch.library.opcheck(ops.rms_norm, (x_rg, w_rg, EPS))
    torch.library.opcheck(ops.rms_norm_backward, (g, x, w, EPS))
    torch.library.opcheck(ops.fused_add_rms_norm, (x_rg, r_rg, w_rg, EPS))
    torch.library.opcheck(ops.fused_add_rms_norm_backward, (g, g, x, w, EPS))
    torch.library.opcheck(ops.fused_add_rms_norm_backward, (g, None, x, w, EPS))


def test_torch_compile_fullgraph():
    torch._dynamo.reset()
    dtype = torch.float32

    def block(x, residual, w1, w2):
        h = rmsnorm.rms_norm(x, w1, EPS)
        out, res = rmsnorm.fused_add_rms_norm(h * 2.0, residual, w2, EPS)
        return out, res

    compiled = torch.compile(block, fullgraph=True, dynamic=False)
    gen = _seeded(8)
    args = [_randn((4, 32), dtype, gen), _randn((4, 32), dtype, gen)]
    args += [_randn((32,), dtype, gen) + 1.0, _randn((32,), dtype, gen) + 1.0]
    eager_args = [a.clone().requires_grad_() for a in args]
    comp_args = [a.clone().requires_grad_() for a in args]

    eager_out = block(*eager_args)
    comp_out = compiled(*comp_args)
    for e, c in zip(eager_out, comp_out):
        torch.testing.assert_close(c, e)
    (eager_out[0].sum() + eager_out[1].pow(2).sum()).backward()
    (comp_out[0].sum() + comp_out[1].pow(2).sum()).backward()
    for e, c in zip(eager_args, comp_args):
        torch.testing.assert_close(c.grad, e.grad)


class LlamaStyleRMSNorm(nn.Module):
    """The shape of transformers' LlamaRMSNorm: a weight parameter and variance_epsilon."""

    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_rms_norm_layer_bound_on_llama_module(dtype):
    hidden = 72
    gen = _seeded(9)
    module = LlamaStyleRMSNorm(hidden, eps=1e-5).to(DEVICE, dtype)
    with torch.no_grad():
        module.weight.copy_(_randn((hidden,), dtype, gen) + 1.0)
    x = _randn((2, 3, hidden), dtype, gen)
    g = _randn((2, 3, hidden), dtype, gen)

    x_ref = x.clone().requires_grad_()
    ref = module(x_ref)
    ref.backward(g)
    ref_wgrad = module.weight.grad.clone()
    module.weight.grad = None

    module.forward = types.MethodType(RMSNorm.forward, module)
    x_k = x.clone().requires_grad_()
    out = module(x_k)
    out.backward(g)
    assert out.dtype == dtype
    # The Llama forward rounds the normalised input before the weight multiply: allow 2 roundings.
    _assert_close(out, ref.detach().double(), dtype, factor=2.0)
    _assert_close(x_k.grad, x_ref.grad.double(), dtype, factor=2.0)
    _assert_close(module.weight.grad, ref_wgrad.double(), dtype, factor=2.0)
    assert RMSNorm.has_backward and RMSNorm.can_torch_compile


def test_fused_add_layer_bound_on_llama_module():
    hidden = 40
    gen = _seeded(10)
    module = LlamaStyleRMSNorm(hidden).to(DEVICE)
    with torch.no_grad():
        module.weight.copy_(_randn((hidden,), torch.float32, gen) + 1.0)
    x = _randn((5, hidden), torch.float32, gen)
    residual = _randn((5, hidden), torch.float32, gen)
    module.forward = types.MethodType(FusedAddRMSNorm.forward, module)
    out, residual_out = module(x, residual)
    torch.testing.assert_close(residual_out, x + residual)
    ref = _ref_rms_norm(x + residual, module.weight.detach(), module.variance_epsilon)
    _assert_close(out, ref, torch.float32)


def test_layer_under_torch_compile():
    torch._dynamo.reset()
    hidden = 48
    module = LlamaStyleRMSNorm(hidden).to(DEVICE)
    module.forward = types.MethodType(RMSNorm.forward, module)
    x = _randn((3, hidden), torch.float32, _seeded(11)).requires_grad_()
    out = torch.compile(module, fullgraph=True)(x)
    out.sum().backward()
    ref, ref_gx, _ = _ref_grads(x, module.weight, torch.ones_like(x), module.variance_epsilon)
    _assert_close(out, ref, torch.float32)
    _assert_close(x.grad, ref_gx, torch.float32)
    assert module.weight.grad is not None
