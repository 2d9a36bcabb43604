"""Benchmark the rotary Triton kernel against a torch eager rotary (and torch.compile of it).

Each shape is timed for x alone (apply_rotary) and for q and k together (apply_rotary_qk, one
launch; k has a quarter of q's heads, as in GQA) against two eager calls.

    python benchmarks/benchmark.py [--variant build/torch-cuda] [--dtype bf16] [--compile] [--sweep]

Imports `rotary` from the path, or from a built variant folder given with --variant. Without a
CUDA device it says so and runs a tiny correctness check under the Triton interpreter instead.
"""

import argparse
import functools
import importlib.util
import os
import sys
import time

import torch

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
# (batch, seqlen, nheads, headdim, rotary_dim)
SHAPES = [
    (1, 4096, 32, 128, 128),
    (4, 4096, 32, 128, 128),
    (4, 4096, 8, 128, 64),
    (16, 2048, 16, 64, 64),
]


def load_rotary(variant):
    if variant is None:
        import rotary

        return rotary
    init = os.path.join(variant, "__init__.py")
    if not os.path.exists(init):
        init = os.path.join(variant, "rotary", "__init__.py")
    spec = importlib.util.spec_from_file_location(
        "rotary", init, submodule_search_locations=[os.path.dirname(init)]
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules["rotary"] = module
    spec.loader.exec_module(module)
    return module


def rotary_eager(x, cos, sin, interleaved=False):
    """The usual eager implementation, in x's dtype (Transformers' rotate_half style)."""
    rotary_dim = 2 * cos.shape[-1]
    cos, sin = cos[: x.shape[1], None, :].to(x.dtype), sin[: x.shape[1], None, :].to(x.dtype)
    rot, rest = x[..., :rotary_dim], x[..., rotary_dim:]
    if interleaved:
        x0, x1 = rot[..., 0::2], rot[..., 1::2]
        out = torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1).flatten(-2)
    else:
        cos, sin = torch.cat((cos, cos), dim=-1), torch.cat((sin, sin), dim=-1)
        x0, x1 = rot.chunk(2, dim=-1)
        out = rot * cos + torch.cat((-x1, x0), dim=-1) * sin
    return torch.cat((out, rest), dim=-1) if rest.shape[-1] else out


def make_inputs(shape, dtype, device):
    batch, seqlen, nheads, headdim, rotary_dim = shape
    x = torch.randn(batch, seqlen, nheads, headdim, device=device, dtype=dtype)
    angle = torch.rand(seqlen, rotary_dim // 2, device=device) * 6.2832
    return x, angle.cos().to(dtype), angle.sin().to(dtype)


def bench_ms(fn, graph):
    """Median ms: in a CUDA graph (kernel time, no host overhead) or launched eagerly."""
    import triton.testing

    if graph:
        try:
            return triton.testing.do_bench_cudagraph(fn, rep=100, return_mode="median")
        except Exception:  # noqa: BLE001 - a function that cannot be captured
            return float("nan")
    return triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")


def run_cuda(rotary, dtype, with_compile):
    print(f"device: {torch.cuda.get_device_name()}  dtype: {dtype}  (medians)")
    print("graph: timed inside a CUDA graph (GPU time); eager: launched from Python each call")
    print("GB/s: (x read + out written + cos/sin read) / graph time")
    header = (
        f"{'shape (b,s,h,d,rd)':26} {'style':5} {'impl':13} {'graph ms':>9} {'GB/s':>7}"
        f" {'eager ms':>9} {'fwd+bwd graph':>14} {'fwd+bwd eager':>14}"
    )
    print(header)
    print("-" * len(header))
    for shape in SHAPES:
        x, cos, sin = make_inputs(shape, dtype, "cuda")
        nbytes = 2 * x.numel() * x.element_size() + 2 * cos.numel() * cos.element_size()
        copy = bench_ms(lambda: x.clone(), graph=True)
        copy_gbs = 2 * x.numel() * x.element_size() / copy / 1e6
        print(f"{str(shape):26} {'-':5} {'x.clone()':13} {copy:9.4f} {copy_gbs:7.0f}")
        for interleaved in (False, True):
            impls = [("triton", rotary.apply_rotary), ("torch eager", rotary_eager)]
            if with_compile:
                torch._dynamo.reset()  # each case compiles afresh (no recompile-limit hits)
                impls.append(("torch.compile", torch.compile(rotary_eager, fullgraph=True, dynamic=False)))
            expected = rotary_eager(x.float(), cos.float(), sin.float(), interleaved)
            xg = x.detach().requires_grad_()
            grad = torch.randn_like(x)
            for name, fn in impls:
                out = fn(x, cos, sin, interleaved)
                torch.testing.assert_close(out.float(), expected, atol=5e-2, rtol=2e-2)
                fwd = lambda: fn(x, cos, sin, interleaved)  # noqa: E731
                fwd_bwd = lambda: torch.autograd.grad(fn(xg, cos, sin, interleaved), xg, grad)  # noqa: E731
                graph_ms = bench_ms(fwd, graph=True)
                style = "gptj" if interleaved else "neox"
                print(
                    f"{str(shape):26} {style:5} {name:13} {graph_ms:9.4f} {nbytes / graph_ms / 1e6:7.0f}"
                    f" {bench_ms(fwd, graph=False):9.4f} {bench_ms(fwd_bwd, graph=True):14.4f}"
                    f" {bench_ms(fwd_bwd, graph=False):14.4f}"
                )


def qk_impls(rotary, with_compile):
    """(name, fn(q, k, cos, sin, interleaved) -> (q_out, k_out)) for the q+k workload."""
    def eager_qk(q, k, cos, sin, interleaved):
        return rotary_eager(q, cos, sin, interleaved), rotary_eager(k, cos, sin, interleaved)

    impls = [("triton qk", rotary.apply_rotary_qk), ("triton 2 calls", lambda q, k, c, s, i: (
        rotary.apply_rotary(q, c, s, i), rotary.apply_rotary(k, c, s, i))), ("torch eager", eager_qk)]
    if with_compile:
        torch._dynamo.reset()
        impls.append(("torch.compile", torch.compile(eager_qk, fullgraph=True, dynamic=False)))
    return impls


def run_cuda_qk(rotary, dtype, with_compile):
    """q [b, s, h, d] and k [b, s, h / 4, d] rotated together: where host overhead shows."""
    print("\nq and k together (k has a quarter of q's heads); eager ms includes the host path")
    header = f"{'q shape (b,s,h,d,rd)':26} {'style':5} {'impl':15} {'graph ms':>9} {'GB/s':>7} {'eager ms':>9}"
    print(header)
    print("-" * len(header))
    for shape in [(1, 1, 32, 128, 128), *SHAPES[:2]]:
        q, cos, sin = make_inputs(shape, dtype, "cuda")
        k = torch.randn(*shape[:2], max(1, shape[2] // 4), shape[3], device="cuda", dtype=dtype)
        nbytes = 2 * (q.numel() + k.numel()) * q.element_size() + 2 * cos.numel() * cos.element_size()
        for interleaved in (False, True):
            expected = [rotary_eager(t.float(), cos.float(), sin.float(), interleaved) for t in (q, k)]
            for name, fn in qk_impls(rotary, with_compile):
                for out, ref in zip(fn(q, k, cos, sin, interleaved), expected):
                    torch.testing.assert_close(out.float(), ref, atol=5e-2, rtol=2e-2)
                call = lambda: fn(q, k, cos, sin, interleaved)  # noqa: E731
                graph_ms = bench_ms(call, graph=True)
                style = "gptj" if interleaved else "neox"
                print(f"{str(shape):26} {style:5} {name:15} {graph_ms:9.4f} {nbytes / graph_ms / 1e6:7.0f}"
                      f" {bench_ms(call, graph=False):9.4f}")


def run_cpu_check(rotary):
    print("no CUDA device: running a tiny correctness check under the Triton interpreter instead")
    x, cos, sin = make_inputs((2, 5, 3, 40, 24), torch.float32, "cpu")
    for interleaved in (False, True):
        start = time.perf_counter()
        out = rotary.apply_rotary(x, cos, sin, interleaved)
        elapsed = time.perf_counter() - start
        err = (out - rotary_eager(x, cos, sin, interleaved)).abs().max().item()
        style = "gptj" if interleaved else "neox"
        print(f"  {style}: max abs error vs eager {err:.2e}, {elapsed * 1e3:.1f} ms (interpreter)")
        assert err < 1e-5, err
    k = x[:, :, :1].clone()  # one k head (MQA)
    for interleaved in (False, True):
        q_out, k_out = rotary.apply_rotary_qk(x, k, cos, sin, interleaved)
        err = max((q_out - rotary_eager(x, cos, sin, interleaved)).abs().max().item(),
                  (k_out - rotary_eager(k, cos, sin, interleaved)).abs().max().item())
        print(f"  {'gptj' if interleaved else 'neox'} q+k: max abs error vs eager {err:.2e}")
        assert err < 1e-5, err


# ---- --sweep: the kernel's launch settings, graph-timed, to choose them on a GPU ------------------

SWEEP_TOKENS = (1, 4096, 32768)  # bench/peers.py's at hidden 4096: q 32 heads, k 8, headdim 128
SWEEP = {"_TILE_ELEMENTS": (1024, 2048, 4096), "_HEADS_PER_TILE": (1, 2, 4, 8, 16), "_NUM_WARPS": (4, 8)}


def run_sweep(rotary, dtype, with_compile, device="cuda"):
    """apply_rotary_qk at bench/peers.py's rotary shapes under every combination of SWEEP's values of
    rotary.kernel's module constants (its launch cache cleared between them), graph-timed: the five
    fastest, the defaults, and torch.compile of the eager q+k with --compile. A guide to setting the
    constants; bench/gpu/peers.sh gives the figures of record."""
    import itertools

    kernel = rotary.kernel
    defaults = tuple(getattr(kernel, name) for name in SWEEP)
    names = [name.strip("_").lower() for name in SWEEP]
    print(f"rotary.kernel's launch settings, {dtype}, graph-timed medians; defaults "
          + " ".join(f"{n}={v}" for n, v in zip(names, defaults)))
    try:
        for tokens in SWEEP_TOKENS:
            q, cos, sin = make_inputs((1, tokens, 32, 128, 128), dtype, device)
            k = torch.randn(1, tokens, 8, 128, device=device, dtype=dtype)
            nbytes = 2 * (q.numel() + k.numel()) * q.element_size() + 2 * cos.numel() * cos.element_size()
            for interleaved in (False, True):
                expected = [rotary_eager(t.float(), cos.float(), sin.float(), interleaved) for t in (q, k)]
                qk = functools.partial(rotary.apply_rotary_qk, q, k, cos, sin, interleaved)
                times = {}
                for values in itertools.product(*SWEEP.values()):
                    for name, value in zip(SWEEP, values):
                        setattr(kernel, name, value)
                    kernel._launch_config.cache_clear()
                    for out, ref in zip(qk(), expected):
                        torch.testing.assert_close(out.float(), ref, atol=5e-2, rtol=2e-2)
                    times[values] = bench_ms(qk, graph=True)
                shown = sorted(times, key=times.get)[:5]
                shown += [] if defaults in shown else [defaults]
                lines = [(" ".join(f"{n}={v}" for n, v in zip(names, values))
                          + (" (defaults)" if values == defaults else ""), times[values]) for values in shown]
                if with_compile:
                    torch._dynamo.reset()
                    compiled = torch.compile(eager_qk, fullgraph=True, dynamic=False)
                    peer = functools.partial(compiled, q, k, cos, sin, interleaved)
                    peer()
                    lines.append(("torch.compile", bench_ms(peer, graph=True)))
                style = "gptj" if interleaved else "neox"
                for label, ms in lines:
                    print(f"  {tokens:>6} x (32 + 8) x 128 {style}  {label:55} {ms * 1e3:9.1f} us"
                          f" {nbytes / ms / 1e6:6.0f} GB/s")
    finally:
        for name, value in zip(SWEEP, defaults):
            setattr(kernel, name, value)
        kernel._launch_config.cache_clear()


def eager_qk(q, k, cos, sin, interleaved):
    return rotary_eager(q, cos, sin, interleaved), rotary_eager(k, cos, sin, interleaved)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variant", help="built variant folder to import rotary from")
    parser.add_argument("--dtype", choices=DTYPES, default="bf16")
    parser.add_argument("--compile", action="store_true", help="also time torch.compile(eager)")
    parser.add_argument("--sweep", action="store_true",
                        help="CUDA: time apply_rotary_qk under each of SWEEP's launch settings instead")
    args = parser.parse_args(argv)
    has_cuda = torch.cuda.is_available()
    if not has_cuda:
        os.environ["TRITON_INTERPRET"] = "1"  # read when the Triton kernels are defined (import)
    rotary = load_rotary(args.variant)
    if has_cuda and args.sweep:
        run_sweep(rotary, DTYPES[args.dtype], args.compile)
    elif has_cuda:
        run_cuda(rotary, DTYPES[args.dtype], args.compile)
        run_cuda_qk(rotary, DTYPES[args.dtype], args.compile)
    else:
        run_cpu_check(rotary)
    return 0


# ---- `kbuild bench` / Hugging Face's `kernels benchmark`: the kernel as self.kernel ------------

try:
    from kernels.benchmark import Benchmark  # Hugging Face's: `kernels benchmark` finds these too
except ImportError:
    from kbuild.benchmark import Benchmark


class RotaryBenchmark(Benchmark):
    """apply_rotary, GPT-NeoX and GPT-J layouts, and apply_rotary_qk (q and k, NeoX), against the
    eager rotary: one large shape in fp16 on CUDA; on the CPU a tiny one (Triton's interpreter runs
    it)."""

    seed = 0

    def setup(self):
        shape, dtype = (SHAPES[1], torch.float16) if self.device == "cuda" else ((2, 5, 3, 40, 24), torch.float32)
        self.x, self.cos, self.sin = make_inputs(shape, dtype, self.device)
        self.k = self.x[:, :, : max(1, shape[2] // 4)].clone()  # GQA: a quarter of the heads

    def benchmark_qk_neox(self):
        self.out = self.kernel.apply_rotary_qk(self.x, self.k, self.cos, self.sin, False)

    def verify_qk_neox(self):
        return tuple(rotary_eager(t, self.cos, self.sin, False) for t in (self.x, self.k))

    def benchmark_neox(self):
        self.out = self.kernel.apply_rotary(self.x, self.cos, self.sin, False)

    def verify_neox(self):
        return rotary_eager(self.x, self.cos, self.sin, False)

    def benchmark_gptj(self):
        self.out = self.kernel.apply_rotary(self.x, self.cos, self.sin, True)

    def verify_gptj(self):
        return rotary_eager(self.x, self.cos, self.sin, True)


if __name__ == "__main__":
    sys.exit(main())
