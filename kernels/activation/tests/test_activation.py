"""Tests for the activation kernels against a float64 torch reference.

`kbuild test` puts a built variant on the path as `activation` and sets KBUILD_TEST_DEVICE to the
variant's backend (`cpu` or `cuda`).
"""

import os
import zlib

import pytest
import torch
import torch.nn.functional as F

import activation
from activation import layers

DEVICE = os.environ.get("KBUILD_TEST_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
# Mark every test (rather than skipping the module) so pytest still collects them and exits 0.
pytestmark = pytest.mark.skipif(
    DEVICE == "cuda" and not torch.cuda.is_available(),
    reason="KBUILD_TEST_DEVICE=cuda but no CUDA device is available",
)

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
TOLERANCES = {
    torch.float32: {"rtol": 1e-5, "atol": 1e-5},
    torch.float16: {"rtol": 1e-3, "atol": 1e-3},
    torch.bfloat16: {"rtol": 1e-2, "atol": 1e-2},
}
# Shapes of x ([..., 2*d]): odd d, d that does and does not allow 16-byte packs, 3-D and 4-D inputs.
SHAPES = [(1, 2), (7, 26), (4, 5, 128), (2, 3, 4, 24), (3, 2000), (33, 2 * 1027), (257, 2 * 1536)]

# op name -> (public function, float64 reference of the activation)
OPS = {
    "silu_and_mul": (activation.silu_and_mul, F.silu),
    "gelu_and_mul": (activation.gelu_and_mul, F.gelu),
    "gelu_tanh_and_mul": (
        activation.gelu_tanh_and_mul,
        lambda a: F.gelu(a, approximate="tanh"),
    ),
}
LAYERS = {
    "silu_and_mul": layers.SiluAndMul,
    "gelu_and_mul": layers.GeluAndMul,
    "gelu_tanh_and_mul": layers.GeluTanhAndMul,
}


def make_x(shape, dtype, seed, requires_grad=False):
    gen = torch.Generator(device=DEVICE).manual_seed(seed)
    x = 2.0 * torch.randn(shape, generator=gen, device=DEVICE, dtype=torch.float32)
    return x.to(dtype).requires_grad_(requires_grad)


def reference(name, x):
    """act(a) * b in float64 for x = [a, b]."""
    a, b = x.double().chunk(2, dim=-1)
    return OPS[name][1](a) * b


def reference_backward(name, grad_out, x):
    x64 = x.detach().double().requires_grad_(True)
    reference(name, x64).backward(grad_out.double())
    return x64.grad


def assert_close(actual, expected, dtype):
    torch.testing.assert_close(actual.double(), expected, **TOLERANCES[dtype])


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", list(OPS))
def test_forward(name, dtype, shape):
    x = make_x(shape, dtype, seed=zlib.crc32(repr((name, shape)).encode()))
    out = OPS[name][0](x)
    assert out.shape == (*shape[:-1], shape[-1] // 2)
    assert out.dtype == dtype and out.device == x.device
    assert_close(out, reference(name, x), dtype)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", list(OPS))
def test_backward(name, dtype, shape):
    x = make_x(shape, dtype, seed=zlib.crc32(repr((name, shape, 1)).encode()), requires_grad=True)
    out = OPS[name][0](x)
    grad_out = make_x(out.shape, dtype, seed=7)
    out.backward(grad_out)
    assert x.grad.shape == x.shape and x.grad.dtype == dtype
    expected = reference_backward(name, grad_out, x)
    assert_close(x.grad, expected, dtype)
    # The backward op on its own, with a non-contiguous grad_out (as autograd may pass one).
    grad_t = grad_out.transpose(0, -1).contiguous().transpose(0, -1)
    direct = getattr(activation.ops, f"{name}_backward")(grad_t, x.detach())
    assert_close(direct, expected, dtype)


@pytest.mark.parametrize("name", list(OPS))
def test_non_contiguous_input(name):
    base = make_x((6, 40), torch.float32, seed=3)
    x = base[:, 4:36]  # a [6, 32] view with row stride 40
    assert not x.is_contiguous()
    assert_close(OPS[name][0](x), reference(name, x), torch.float32)
    xt = make_x((16, 5), torch.float32, seed=4).t()  # [5, 16], transposed
    assert_close(OPS[name][0](xt), reference(name, xt), torch.float32)


@pytest.mark.parametrize("shape", [(0, 16), (3, 0), (2, 0, 8)], ids=str)
@pytest.mark.parametrize("name", list(OPS))
def test_empty(name, shape):
    x = make_x(shape, torch.float16, seed=0, requires_grad=True)
    out = OPS[name][0](x)
    assert out.shape == (*shape[:-1], shape[-1] // 2)
    out.sum().backward()
    assert x.grad.shape == x.shape


@pytest.mark.parametrize("name", list(OPS))
def test_bad_inputs(name):
    with pytest.raises(RuntimeError, match="even"):
        OPS[name][0](torch.zeros(4, 7, device=DEVICE))
    with pytest.raises(RuntimeError, match="float32, float16 or bfloat16"):
        OPS[name][0](torch.zeros(4, 8, device=DEVICE, dtype=torch.float64))
    backward_op = getattr(activation.ops, f"{name}_backward")
    with pytest.raises(RuntimeError, match="shape"):
        backward_op(torch.zeros(4, 3, device=DEVICE), torch.zeros(4, 8, device=DEVICE))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("name", list(OPS))
def test_opcheck(name, dtype):
    x = make_x((3, 5, 2 * 24), dtype, seed=11, requires_grad=True)
    torch.library.opcheck(getattr(activation.ops, name), (x,))
    grad_out = make_x((3, 5, 24), dtype, seed=12)
    torch.library.opcheck(getattr(activation.ops, f"{name}_backward"), (grad_out, x.detach()))


def test_torch_compile_fullgraph():
    def f(x):
        y = activation.silu_and_mul(x) + activation.gelu_and_mul(x)
        return y * activation.gelu_tanh_and_mul(x)

    compiled = torch.compile(f, fullgraph=True)
    for shape in [(8, 64), (2, 3, 40)]:
        x = make_x(shape, torch.float32, seed=21, requires_grad=True)
        x_ref = x.detach().clone().requires_grad_(True)
        out = compiled(x)
        expected = f(x_ref)
        torch.testing.assert_close(out, expected)
        grad_out = make_x(out.shape, torch.float32, seed=22)
        out.backward(grad_out)
        expected.backward(grad_out)
        torch.testing.assert_close(x.grad, x_ref.grad)


@pytest.mark.parametrize("name", list(LAYERS))
def test_layers(name):
    cls = LAYERS[name]
    assert cls.has_backward is True and cls.can_torch_compile is True
    assert set(vars(cls)) - {"__module__", "__doc__", "__qualname__", "__firstlineno__",
                             "__static_attributes__", "has_backward", "can_torch_compile"} == {
        "forward"
    }
    layer = cls()
    assert not list(layer.parameters()) and not list(layer.buffers())
    x = make_x((2, 3, 2 * 40), torch.bfloat16, seed=31, requires_grad=True)
    out = layer(x)
    assert_close(out, reference(name, x), torch.bfloat16)
    out.float().sum().backward()
    assert x.grad is not None and x.grad.shape == x.shape


# Values where the kernels' fast exp/reciprocal meet their limits (overflowing e^{-a}, a^3 and a^2,
# divisors past 2^126) and inf/NaN. torch's CUDA kernels are the reference: same dtype, NaN where
# they give NaN. The backward only gets the finite values: torch's own backward turns inf (and
# gelu_tanh's overflowing a^2) into NaN by formula, which nothing downstream relies on.
SPECIAL = [float("inf"), float("-inf"), float("nan")]
LARGE = [0.0, -0.0, 1.0, -1.0, 5.6, -5.6, 10.0, -10.0, 30.0, -30.0, 44.0, -44.0, 87.5, -87.5,
         88.7, -88.7, 100.0, -100.0, 1e4, -1e4, 6e4, -6e4]
LARGE_F32 = [1e6, -1e6, 1e13, -1e13, 1e30, -1e30]


@pytest.mark.skipif(DEVICE != "cuda", reason="checks the CUDA kernels' fast math against torch")
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", list(OPS))
def test_special_values(name, dtype):
    finite = LARGE + (LARGE_F32 if dtype != torch.float16 else [])
    a = torch.tensor(finite + SPECIAL, device=DEVICE).to(dtype)
    b = torch.full_like(a, 1.5)  # a non-trivial gate; 16 columns or more take the 16-byte packs
    x = torch.cat([a, b]).reshape(1, -1)
    expected = (OPS[name][1](a) * b).reshape(1, -1)
    torch.testing.assert_close(OPS[name][0](x), expected, equal_nan=True, **TOLERANCES[dtype])

    af = torch.tensor(finite, device=DEVICE).to(dtype)
    xf = torch.cat([af, torch.full_like(af, 1.5)]).reshape(1, -1)
    grad_out = torch.full((1, af.numel()), 0.75, device=DEVICE, dtype=dtype)
    xr = xf.clone().requires_grad_(True)
    ar, br = xr.chunk(2, dim=-1)
    (OPS[name][1](ar) * br).backward(grad_out)
    grad = getattr(activation.ops, f"{name}_backward")(grad_out, xf)
    torch.testing.assert_close(grad, xr.grad, equal_nan=True, **TOLERANCES[dtype])
