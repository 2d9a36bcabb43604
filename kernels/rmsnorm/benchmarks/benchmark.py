"""Benchmark rmsnorm against PyTorch: eager (fp32 upcast), F.rms_norm and torch.compile.

Run with the built package on the path (`import rmsnorm`). On CUDA it times large shapes with CUDA
events; without a GPU, small shapes on the CPU. Prints median times and the bandwidth implied by
the bytes each op must move (inputs read once, outputs written once).

    python benchmarks/benchmark.py [--device cpu|cuda] [--reps N] [--no-compile]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

EPS = 1e-6


# ---- reference implementations -----------------------------------------------------------------


def eager_rms_norm(x, w):
    # transformers' LlamaRMSNorm: upcast to float32, normalise, round, scale.
    xf = x.float()
    xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + EPS)
    return w * xf.to(x.dtype)


def torch_rms_norm(x, w):
    return F.rms_norm(x, (x.shape[-1],), w, EPS)


def eager_fused_add(x, r, w):
    s = x + r
    return eager_rms_norm(s, w), s


def torch_fused_add(x, r, w):
    s = x + r
    return torch_rms_norm(s, w), s


def kernel_rms_norm(x, w):
    import rmsnorm  # the script's own run: the built package on the path

    return rmsnorm.rms_norm(x, w, EPS)


def kernel_fused_add(x, r, w):
    import rmsnorm

    return rmsnorm.fused_add_rms_norm(x, r, w, EPS)


# ---- timing ------------------------------------------------------------------------------------


def median_seconds(fn, device: str, reps: int) -> float:
    for _ in range(3):
        fn()
    if device == "cuda":
        torch.cuda.synchronize()
        times = []
        for _ in range(reps):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3)
        return statistics.median(times)
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def backward_fn(forward, inputs, grads):
    """A callable running only the backward of forward(*inputs) with the given output grads."""
    leaves = [t.detach().requires_grad_() for t in inputs]
    outs = forward(*leaves)
    outs = outs if isinstance(outs, tuple) else (outs,)
    return lambda: torch.autograd.grad(outs, leaves, grads[: len(outs)], retain_graph=True)


# ---- cases -------------------------------------------------------------------------------------


def shapes_for(device: str):
    if device == "cuda":
        return [
            ((65536, 4096), torch.bfloat16),
            ((16384, 8192), torch.bfloat16),
            ((4096, 4096), torch.bfloat16),
            ((32768, 1024), torch.float16),
            ((16384, 4096), torch.float32),
            ((8192, 5120), torch.bfloat16),
        ]
    return [((256, 1024), torch.float32), ((64, 4096), torch.bfloat16), ((512, 511), torch.float32)]


def implementations(compile_: bool):
    impls = {
        "rms_norm": [("kbuild rmsnorm", kernel_rms_norm), ("eager fp32", eager_rms_norm),
                     ("F.rms_norm", torch_rms_norm)],
        "fused_add_rms_norm": [("kbuild rmsnorm", kernel_fused_add), ("eager fp32", eager_fused_add),
                               ("F.rms_norm", torch_fused_add)],
    }
    if compile_:
        impls["rms_norm"].append(("torch.compile", torch.compile(eager_rms_norm, dynamic=False)))
        impls["fused_add_rms_norm"].append(
            ("torch.compile", torch.compile(eager_fused_add, dynamic=False))
        )
    return impls


def run(device: str, reps: int, compile_: bool) -> None:
    rows = []
    gen = torch.Generator(device="cpu").manual_seed(0)
    for shape, dtype in shapes_for(device):
        torch._dynamo.reset()  # one compile per shape, well under dynamo's recompile limit
        x = torch.randn(shape, generator=gen).to(device, dtype)
        r = torch.randn(shape, generator=gen).to(device, dtype)
        g = torch.randn(shape, generator=gen).to(device, dtype)
        w = (torch.randn(shape[-1:], generator=gen) + 1).to(device, dtype)
        es = x.element_size() * x.numel()
        for op, impls in implementations(compile_).items():
            inputs = (x, w) if op == "rms_norm" else (x, r, w)
            # bytes: forward reads x (and r), writes out (and r_out); backward reads grads + the
            # normalised input, writes grad_x (and grad_r, identical, counted once).
            fwd_bytes = es * (2 if op == "rms_norm" else 4)
            bwd_bytes = es * (3 if op == "rms_norm" else 4)
            for name, fn in impls:
                t_fwd = median_seconds(lambda: fn(*inputs), device, reps)
                t_bwd = median_seconds(backward_fn(fn, inputs, (g, g)), device, reps)
                rows.append((op, "x".join(map(str, shape)), str(dtype).replace("torch.", ""), name,
                             t_fwd * 1e6, fwd_bytes / t_fwd / 1e9, t_bwd * 1e6, bwd_bytes / t_bwd / 1e9))
                del fn
    _print_table(rows, device)


def _print_table(rows, device: str) -> None:
    header = ("op", "shape", "dtype", "impl", "fwd us", "fwd GB/s", "bwd us", "bwd GB/s")
    cells = [header] + [
        (op, shape, dt, name, f"{tf:.1f}", f"{bf:.0f}", f"{tb:.1f}", f"{bb:.0f}")
        for op, shape, dt, name, tf, bf, tb, bb in rows
    ]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    name = torch.cuda.get_device_name() if device == "cuda" else "CPU"
    print(f"rmsnorm benchmark on {name} (torch {torch.__version__}), median times")
    for i, row in enumerate(cells):
        print("  ".join(c.ljust(w) if j < 4 else c.rjust(w) for j, (c, w) in enumerate(zip(row, widths))))
        if i == 0:
            print("  ".join("-" * w for w in widths))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cpu", "cuda"],
                        default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--reps", type=int, default=None, help="timed repetitions (default 50 cuda, 10 cpu)")
    parser.add_argument("--no-compile", action="store_true", help="skip the torch.compile baseline")
    args = parser.parse_args(argv)
    reps = args.reps or (50 if args.device == "cuda" else 10)
    run(args.device, reps, compile_=not args.no_compile)
    return 0


# ---- `kbuild bench` / Hugging Face's `kernels benchmark`: the kernel as self.kernel ------------

try:
    from kernels.benchmark import Benchmark  # Hugging Face's: `kernels benchmark` finds these too
except ImportError:
    from kbuild.benchmark import Benchmark


class RmsNormBenchmark(Benchmark):
    """rms_norm and fused_add_rms_norm on one large shape (fp16 on CUDA, fp32 on the CPU) against
    transformers' eager RMSNorm (fp32 upcast)."""

    seed = 0

    def setup(self):
        (rows, hidden), dtype = ((16384, 4096), torch.float16) if self.device == "cuda" else ((256, 1024), torch.float32)
        self.x = torch.randn(rows, hidden, device=self.device, dtype=dtype)
        self.r = torch.randn_like(self.x)
        self.w = torch.rand(hidden, device=self.device, dtype=dtype) + 0.5

    def benchmark_rms_norm(self):
        self.out = self.kernel.rms_norm(self.x, self.w, EPS)

    def verify_rms_norm(self):
        return eager_rms_norm(self.x, self.w)

    def benchmark_fused_add_rms_norm(self):
        self.out = self.kernel.fused_add_rms_norm(self.x, self.r, self.w, EPS)

    def verify_fused_add_rms_norm(self):
        return eager_fused_add(self.x, self.r, self.w)


if __name__ == "__main__":
    raise SystemExit(main())
