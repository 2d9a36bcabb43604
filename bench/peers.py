"""kbuild's first-party kernels beside every peer, in one process (issue 33).

    python bench/peers.py [--device cuda|cpu] [--tokens 1,4096,32768] [--hidden 4096] [--shapes 4096x1024,...]
                          [--dtypes fp16,bf16] [--workloads rms_norm,silu_and_mul,...]
                          [--variant-dir rmsnorm=PATH] [--rounds 3] [--timing launch|graph|graph-cold] [--json OUT]

kernels/rmsnorm, kernels/activation and kernels/rotary are imported from their built variant folders
with kbuild's own local loader (`kbuild.get_local_kernel`: the variant that fits this machine, or the
folder `--variant-dir KERNEL=PATH` names). Each workload is timed against:

- eager: the Hugging Face transformers-style reference (LlamaRMSNorm's float32 upcast, then round,
  then scale; `act(x[..., :d]) * x[..., d:]`; rotate_half apply_rotary_pos_emb for GPT-NeoX,
  rotate_every_two for GPT-J);
- torch.compile of that eager function (static shapes, fullgraph; one compile per shape and dtype);
- torch op: `torch.nn.functional.rms_norm` where the workload has one;
- Liger-Kernel (`liger_kernel`): LigerRMSNormFunction and LigerFusedAddRMSNormFunction ("llama"
  casting, the LlamaRMSNorm math), LigerFusedGateUpSiLUMulFunction (the same [.., 2d] layout) and
  LigerSiLUMulFunction / LigerGELUMulFunction on contiguous halves, liger_rotary_pos_emb (NeoX).

A peer that is missing, or does not compute the same math, is a row entry saying why, never dropped.
Every peer's output (the gradients, for fwd+bwd) is compared with eager's first: a peer off by more
than a few roundings is reported with its max |diff| and not timed.

Timing: on CUDA `triton.testing.do_bench` (L2 flushed before each call, median of its calls); on the
CPU a perf_counter loop. do_bench's L2 flush hides up to ~60 us of a call's host time on an H200;
a call that needs more is timed by its host (small shapes, every forward+backward). `--timing graph`
times the GPU's work alone instead: `do_bench_cudagraph` replays the calls from a CUDA graph (no
host time, no L2 flush); `--timing graph-cold` the same with an L2 flush captured before each call and
the flush's own time subtracted (a peer that rewrites its input in place keeps a working set that fits in L2
warm across replays; one that writes new outputs cannot). A peer that cannot be captured is absent, saying why.
Peers take turns: `--rounds` rounds, each timing every peer once, the order
reversed every other round so a slow spell of the machine falls on all; a peer's figure is the median
of its rounds. fwd+bwd times the forward and `torch.autograd.grad` together (fresh grads each call).
Bytes moved are the minimum a kernel must move (read each input once, write each output once; see
`bytes_moved`); GB/s and % of the copy bandwidth, which is measured in the same run by timing
`dst.copy_(src)` of a 1 GiB buffer on the device (read + write counted).

Time (H200, 16 vCPUs): torch.compile dominates. On this 2-core CPU a compile took 0.7 s forward
and 1.4 s forward+backward once warm (4.4 s the first); on the H200, with Triton code generation and
autotuning, about 2 s and 4 s. The 9 workloads compile 7 forward and 2 forward+backward functions
per (shape, dtype): ~22 s, plus ~3 s of timing. The default CUDA grid (3 shapes x 2 dtypes) is about
6 x 25 s + 20 s start-up (imports, Liger's first Triton compiles) = ~3 min; each extra (shape, dtype)
adds ~25 s (`--hidden 1024,4096,8192` is ~8 min: run it detached, bench/gpu/peers.sh).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from types import ModuleType

import torch  # noqa: TID253 - a benchmark of torch kernels: torch is what it runs
import torch.nn.functional as F  # noqa: TID253 - as torch

from kbuild import KernelError, get_local_kernel

REPO = Path(__file__).resolve().parents[1]
EPS = 1e-6
HEAD_DIM = 128  # rotary: Llama/Qwen heads; q has hidden/128 heads, k a quarter of them (GQA)
DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
# workload -> the kbuild kernel that implements it
WORKLOADS = {
    "rms_norm": "rmsnorm", "rms_norm_fwd_bwd": "rmsnorm",
    "fused_add_rms_norm": "rmsnorm", "fused_add_rms_norm_fwd_bwd": "rmsnorm",
    "silu_and_mul": "activation", "gelu_and_mul": "activation", "gelu_tanh_and_mul": "activation",
    "rotary_neox": "rotary", "rotary_gptj": "rotary",
}
PEERS = ("eager", "torch.compile", "torch op", "liger", "liger (a, b)")
DEFAULTS = {"cuda": {"tokens": "1,4096,32768", "hidden": "4096"}, "cpu": {"tokens": "1,64", "hidden": "256"}}
# A peer agrees with eager when max |diff| <= TOL * max(1, max |eager|): a few roundings of the
# dtype (bf16 keeps 8 bits), far below what a different formula gives.
TOL = {torch.float32: 1e-4, torch.float16: 1e-2, torch.bfloat16: 3e-2}


# ---- the pure arithmetic (tests/unit/test_peers_bench.py) ----------------------------------------


def rotary_heads(hidden: int) -> tuple[int, int, int]:
    """(q heads, k heads, head dim) for a model of this hidden size."""
    head_dim = min(HEAD_DIM, hidden)
    q_heads = max(1, hidden // head_dim)
    return q_heads, max(1, q_heads // 4), head_dim


def bytes_moved(workload: str, tokens: int, hidden: int, itemsize: int) -> int:
    """The fewest bytes the workload can move: each input read once, each output written once.

    fwd+bwd is the forward's bytes plus the backward's (it reads the output grads, the saved input
    and the weight; it writes grad x and grad weight; fused add's grad x and grad residual are one
    tensor). Activations: x is [tokens, 2 * hidden], out [tokens, hidden]. Rotary: q and k read and
    written, the cos and sin tables ([tokens, head_dim / 2] each) read.
    """
    th, h = tokens * hidden, hidden
    elements = {
        "rms_norm": 2 * th + h,                                  # x, w -> y
        "rms_norm_fwd_bwd": (2 * th + h) + (3 * th + 2 * h),     # + dy, x, w -> dx, dw
        "fused_add_rms_norm": 4 * th + h,                        # x, r, w -> y, s
        "fused_add_rms_norm_fwd_bwd": (4 * th + h) + (5 * th + 2 * h),  # + dy, ds, s, w -> dx, dw
        "silu_and_mul": 3 * th, "gelu_and_mul": 3 * th, "gelu_tanh_and_mul": 3 * th,
    }
    if workload.startswith("rotary"):
        q_heads, k_heads, head_dim = rotary_heads(hidden)
        qk = tokens * (q_heads + k_heads) * head_dim
        return itemsize * (2 * qk + 2 * tokens * (head_dim // 2))
    return itemsize * elements[workload]


def speedups(kbuild_us: float | None, peer_us: dict[str, float | None]) -> dict:
    """kbuild's speed-up over each timed peer (peer time / kbuild time, > 1: kbuild is faster) and
    over the fastest of them."""
    timed = {name: us for name, us in peer_us.items() if us is not None}
    if kbuild_us is None or not timed:
        return {"vs": {}, "best_peer": None, "vs_best": None}
    best = min(timed, key=timed.__getitem__)
    return {"vs": {name: us / kbuild_us for name, us in timed.items()}, "best_peer": best,
            "vs_best": timed[best] / kbuild_us}


def gb_per_s(nbytes: int, us: float) -> float:
    return nbytes / (us * 1e-6) / 1e9


def agrees(max_diff: float, ref_max: float, dtype) -> bool:
    return max_diff <= TOL[dtype] * max(1.0, ref_max)


# ---- arguments ------------------------------------------------------------------------------------


def positive_ints(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated positive integers, got {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected comma-separated positive integers, got {text!r}")
    return values


def names_from(allowed) -> Callable[[str], list[str]]:
    def parse(text: str) -> list[str]:
        names = [v.strip() for v in text.split(",") if v.strip()]
        unknown = [n for n in names if n not in allowed]
        if unknown or not names:
            raise argparse.ArgumentTypeError(
                f"unknown {', '.join(unknown) or 'empty list'} (choose from {', '.join(allowed)})")
        return names
    return parse


def shapes(text: str) -> list[tuple[int, int]]:
    """"1x4096,4096x8192": (tokens, hidden) pairs."""
    pairs = []
    for item in (v.strip() for v in text.split(",") if v.strip()):
        tokens, sep, hidden = item.partition("x")
        if not (sep and tokens.isdigit() and hidden.isdigit() and int(tokens) > 0 and int(hidden) > 0):
            raise argparse.ArgumentTypeError(f"expected TOKENSxHIDDEN pairs such as 1x4096,4096x8192, got {item!r}")
        pairs.append((int(tokens), int(hidden)))
    if not pairs:
        raise argparse.ArgumentTypeError("expected TOKENSxHIDDEN pairs such as 1x4096,4096x8192, got an empty list")
    return pairs


def variant_dir(text: str) -> tuple[str, Path]:
    kernel, sep, path = text.partition("=")
    if not sep or kernel not in set(WORKLOADS.values()) or not path:
        raise argparse.ArgumentTypeError(
            f"expected KERNEL=PATH with KERNEL one of rmsnorm, activation, rotary, got {text!r}")
    return kernel, Path(path)


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="bench/peers.py", description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--tokens", type=positive_ints,
                        help="token counts (default: 1,4096,32768 on cuda, 1,64 on cpu)")
    parser.add_argument("--hidden", type=positive_ints, help="hidden sizes (default: 4096 on cuda, 256 on cpu)")
    parser.add_argument("--shapes", type=shapes, metavar="TxH,...",
                        help="these (tokens, hidden) pairs instead of every tokens x hidden, e.g. 1x4096,4096x8192")
    parser.add_argument("--dtypes", type=names_from(DTYPES), default=["fp16", "bf16"])
    parser.add_argument("--workloads", type=names_from(WORKLOADS), default=list(WORKLOADS))
    parser.add_argument("--variant-dir", type=variant_dir, action="append", default=[], metavar="KERNEL=PATH",
                        help="load KERNEL from this variant (or build) folder instead of kernels/KERNEL/build")
    parser.add_argument("--no-compile", action="store_true", help="leave torch.compile out (no compiles: fast)")
    parser.add_argument("--rounds", type=int, default=3, help="turns each peer gets (median over them)")
    parser.add_argument("--timing", choices=sorted(TIMINGS), default="launch",
                        help="CUDA: launch = each call as the host issues it (do_bench); graph = GPU time alone, "
                             "replayed from a CUDA graph (do_bench_cudagraph); graph-cold = the same, L2 "
                             "flushed before each call")
    parser.add_argument("--rep-ms", type=float, default=20, help="CUDA: do_bench's timed window per turn")
    parser.add_argument("--cpu-reps", type=int, default=10, help="CPU: calls per turn")
    parser.add_argument("--copy-mib", type=int, help="copy-bandwidth buffer (default 1024 on cuda, 256 on cpu)")
    parser.add_argument("--json", type=Path, help="write every figure here")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("argument --rounds: must be at least 1")
    if args.timing.startswith("graph") and args.device != "cuda":
        parser.error(f"argument --timing: {args.timing} replays CUDA graphs; it needs --device cuda")
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("argument --device: cuda asked for, but torch sees no CUDA device")
    defaults = DEFAULTS[args.device]
    if args.shapes and (args.tokens or args.hidden):
        parser.error("argument --shapes: give either --shapes or --tokens/--hidden")
    args.tokens = args.tokens or positive_ints(defaults["tokens"])
    args.hidden = args.hidden or positive_ints(defaults["hidden"])
    args.shapes = args.shapes or [(t, h) for t in args.tokens for h in args.hidden]
    args.copy_mib = args.copy_mib or (1024 if args.device == "cuda" else 256)
    return args


# ---- loading kbuild's kernels and the peers -------------------------------------------------------


class Unavailable(Exception):
    """A kernel or peer that cannot run here; the message says why (one line)."""


def load_kernels(names: set[str], device: str, overrides: dict[str, Path]) -> dict:
    """kernel name -> its module through kbuild's local loader, or why it cannot be imported here
    (its workloads are then reported absent). A missing build folder ends the run: build it first.
    rotary is Triton only (its one variant is torch-cuda): on the CPU it runs under Triton's
    interpreter, as its own tests do, so its CPU figures say nothing about speed."""
    loaded: dict[str, ModuleType | str] = {}
    for name in sorted(names):
        path = overrides.get(name, REPO / "kernels" / name / "build")
        backend = "cuda" if device == "cuda" or name == "rotary" else "cpu"
        if name == "rotary" and device == "cpu":
            os.environ["TRITON_INTERPRET"] = "1"  # read when its Triton kernels are defined
        if not path.exists():
            raise Unavailable(f"{name}: no built variant folder {path}; build it first "
                              f"(kbuild build kernels/{name}, or --variant-dir {name}=PATH)")
        try:
            loaded[name] = get_local_kernel(path, backend=backend)
        except (KernelError, ImportError) as e:
            loaded[name] = f"{path}: {type(e).__name__}: {str(e).splitlines()[0]}"
    return loaded


def load_liger(device: str):
    """Liger's functions by role, or {"absent": why Liger cannot run here}."""
    if device != "cuda":
        return {"absent": "Liger's kernels are Triton GPU kernels: they need a CUDA device"}
    try:
        import liger_kernel  # noqa: PLC0415 - optional package: a peer, absent when not installed
        from liger_kernel.ops import (  # noqa: PLC0415 - optional package
            LigerFusedAddRMSNormFunction,
            LigerGELUMulFunction,
            LigerRMSNormFunction,
            LigerSiLUMulFunction,
        )
        from liger_kernel.ops.swiglu import LigerFusedGateUpSiLUMulFunction  # noqa: PLC0415 - optional package
        from liger_kernel.transformers.rope import liger_rotary_pos_emb  # noqa: PLC0415 - optional package
    except ImportError as e:
        return {"absent": f"liger_kernel not importable: {e}"}
    version = getattr(liger_kernel, "__version__", None) or _dist_version("liger-kernel")
    return {"version": version, "rms_norm": LigerRMSNormFunction, "fused_add": LigerFusedAddRMSNormFunction,
            "silu_fused": LigerFusedGateUpSiLUMulFunction, "silu_ab": LigerSiLUMulFunction,
            "gelu_tanh_ab": LigerGELUMulFunction, "rope": liger_rotary_pos_emb, "absent": None}


def _dist_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


# ---- eager references (the formulas transformers' modelling code uses) ---------------------------


def eager_rms_norm(x, w):
    # LlamaRMSNorm: upcast to float32, normalise, round to the input dtype, then scale.
    xf = x.float()
    xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + EPS)
    return w * xf.to(x.dtype)


def eager_fused_add(x, r, w):
    s = x + r
    return eager_rms_norm(s, w), s


def torch_op_rms_norm(x, w):
    return F.rms_norm(x, (x.shape[-1],), w, EPS)


def torch_op_fused_add(x, r, w):
    s = x + r
    return torch_op_rms_norm(s, w), s


def eager_gated(act):
    def gated(x):
        d = x.shape[-1] // 2
        return act(x[..., :d]) * x[..., d:]
    return gated


ACTS = {"silu_and_mul": F.silu, "gelu_and_mul": F.gelu,
        "gelu_tanh_and_mul": lambda a: F.gelu(a, approximate="tanh")}


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def eager_rope_neox(q, k, cos, sin):
    # apply_rotary_pos_emb with unsqueeze_dim=2: q, k are [batch, seq, heads, head_dim], cos and sin
    # [batch, seq, head_dim] (the two halves repeated), in the activations' dtype.
    cos, sin = cos.unsqueeze(2), sin.unsqueeze(2)
    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


def rotate_every_two(x):
    return torch.stack((-x[..., 1::2], x[..., ::2]), dim=-1).flatten(-2)


def eager_rope_gptj(q, k, cos, sin):
    # GPT-J: channel pairs (2i, 2i+1) rotate; cos and sin are [batch, seq, head_dim / 2].
    cos = torch.repeat_interleave(cos[:, :, None, :], 2, 3)
    sin = torch.repeat_interleave(sin[:, :, None, :], 2, 3)
    return q * cos + rotate_every_two(q) * sin, k * cos + rotate_every_two(k) * sin


# ---- cases: one workload at one shape and dtype ---------------------------------------------------


@dataclass
class Peer:
    name: str
    call: Callable | None = None       # no arguments; returns the outputs to check (tensors)
    check: Callable | None = None      # for a peer that writes in place: a call on fresh copies
    absent: str | None = None          # why it is not timed
    max_diff: float | None = None
    us: float | None = None
    rounds: list = field(default_factory=list)


@dataclass
class Case:
    workload: str
    tokens: int
    hidden: int
    dtype: torch.dtype
    kbuild: Peer
    peers: list[Peer]
    reference: Callable  # eager's outputs, to check every peer against


def as_tuple(out):
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def compiled(fn, enabled: bool) -> Peer:
    if not enabled:
        return Peer("torch.compile", absent="left out (--no-compile)")
    return Peer("torch.compile", torch.compile(fn, fullgraph=True, dynamic=False))


def forward_only(peer: Peer, *inputs) -> Peer:
    if peer.call is not None:
        fn = peer.call
        peer.call = lambda: _no_grad(fn, inputs)
    return peer


def _no_grad(fn, inputs):
    with torch.no_grad():
        return fn(*inputs)


def with_backward(peer: Peer, inputs, grads) -> Peer:
    """The peer's forward and backward as one call returning the input grads."""
    if peer.call is not None:
        fn = peer.call
        leaves = [t.detach().clone().requires_grad_() for t in inputs]

        def call():
            return torch.autograd.grad(as_tuple(fn(*leaves)), leaves, grads)
        peer.call = call
    return peer


def rms_norm_case(workload, tokens, hidden, dtype, device, kernels, liger, compile_):
    gen = torch.Generator(device="cpu").manual_seed(0)
    x = torch.randn(tokens, hidden, generator=gen).to(device, dtype)
    r = torch.randn(tokens, hidden, generator=gen).to(device, dtype)
    w = (torch.rand(hidden, generator=gen) + 0.5).to(device, dtype)
    fused = workload.startswith("fused_add")
    k = kernels["rmsnorm"]
    inputs: tuple[torch.Tensor, ...]
    ref_fn: Callable[..., torch.Tensor]
    if fused:
        impls = [Peer("kbuild", lambda x, r, w: k.fused_add_rms_norm(x, r, w, EPS)), Peer("eager", eager_fused_add),
                 compiled(eager_fused_add, compile_), Peer("torch op", torch_op_fused_add)]
        inputs, ref_fn = (x, r, w), eager_fused_add
    else:
        impls = [Peer("kbuild", lambda x, w: k.rms_norm(x, w, EPS)), Peer("eager", eager_rms_norm),
                 compiled(eager_rms_norm, compile_), Peer("torch op", torch_op_rms_norm)]
        inputs, ref_fn = (x, w), eager_rms_norm
    if liger["absent"]:
        impls.append(Peer("liger", absent=liger["absent"]))
    elif fused:  # "llama" casting is LlamaRMSNorm's; offset 0; in_place=False leaves our grads alone
        impls.append(Peer("liger", lambda x, r, w: liger["fused_add"].apply(x, r, w, EPS, 0.0, "llama", False)))
    else:
        impls.append(Peer("liger", lambda x, w: liger["rms_norm"].apply(x, w, EPS, 0.0, "llama", False)))
    impls.append(Peer("liger (a, b)", absent="no second Liger form for this workload"))
    if workload.endswith("fwd_bwd"):
        grads = tuple(torch.randn(tokens, hidden, generator=gen).to(device, dtype) for _ in range(2 if fused else 1))
        impls = [with_backward(p, inputs, grads) for p in impls]
        reference = impls[1].call
        assert reference is not None  # eager's: with_backward keeps a call it was given
    else:
        impls = [forward_only(p, *inputs) for p in impls]
        reference = lambda: _no_grad(ref_fn, inputs)  # noqa: E731
    return Case(workload, tokens, hidden, dtype, impls[0], impls[1:], reference)


def activation_case(workload, tokens, hidden, dtype, device, kernels, liger, compile_):
    gen = torch.Generator(device="cpu").manual_seed(0)
    x = torch.randn(tokens, 2 * hidden, generator=gen).to(device, dtype)
    # Liger's two-tensor functions take gate and up as separate contiguous tensors (LigerSwiGLUMLP's
    # gate_proj and up_proj outputs): given them ready, outside the timing.
    a, b = x[:, :hidden].contiguous(), x[:, hidden:].contiguous()
    eager = eager_gated(ACTS[workload])
    kernel = getattr(kernels["activation"], workload)
    impls = [Peer("kbuild", kernel), Peer("eager", eager), compiled(eager, compile_),
             Peer("torch op", absent="torch has no fused gated activation")]
    ab, fused = Peer("liger (a, b)", absent=liger["absent"]), Peer("liger", absent=liger["absent"])
    if not liger["absent"]:
        if workload == "silu_and_mul":
            fused.call = lambda x: liger["silu_fused"].apply(x)
            ab.call = lambda x: liger["silu_ab"].apply(a, b)
        elif workload == "gelu_tanh_and_mul":
            fused.absent = "Liger's GEGLU takes gate and up apart: see liger (a, b)"
            ab.call = lambda x: liger["gelu_tanh_ab"].apply(a, b)
        else:
            fused.absent = ab.absent = "Liger has no erf GELU gate (its GEGLU is the tanh approximation)"
    impls = [forward_only(p, x) for p in impls + [fused, ab]]
    return Case(workload, tokens, hidden, dtype, impls[0], impls[1:], lambda: _no_grad(eager, (x,)))


def rotary_case(workload, tokens, hidden, dtype, device, kernels, liger, compile_):
    gen = torch.Generator(device="cpu").manual_seed(0)
    q_heads, k_heads, head_dim = rotary_heads(hidden)
    q = torch.randn(1, tokens, q_heads, head_dim, generator=gen).to(device, dtype)
    k = torch.randn(1, tokens, k_heads, head_dim, generator=gen).to(device, dtype)
    angle = torch.rand(tokens, head_dim // 2, generator=gen) * 6.2832
    cos_h, sin_h = angle.cos().to(device, dtype), angle.sin().to(device, dtype)  # kbuild's [seq, rd/2] tables
    gptj = workload == "rotary_gptj"
    rot_qk = kernels["rotary"].apply_rotary_qk  # q and k in one call and one launch, as the peers do
    if gptj:
        eager, cos, sin = eager_rope_gptj, cos_h[None], sin_h[None]
    else:
        eager, cos, sin = eager_rope_neox, torch.cat((cos_h, cos_h), -1)[None], torch.cat((sin_h, sin_h), -1)[None]
    impls = [Peer("kbuild", lambda q, k, cos, sin: rot_qk(q, k, cos_h, sin_h, gptj)),
             Peer("eager", eager), compiled(eager, compile_), Peer("torch op", absent="torch has no rotary op")]
    liger_peer = Peer("liger", absent=liger["absent"])
    if not liger["absent"] and gptj:
        liger_peer.absent = "liger_rotary_pos_emb is the NeoX (rotate_half) layout only"
    elif not liger["absent"]:
        liger_peer = liger_rope_peer(liger["rope"], q, k, cos, sin)
    impls = [forward_only(p, q, k, cos, sin) for p in impls]
    impls += [liger_peer, Peer("liger (a, b)", absent="no second Liger form for this workload")]
    return Case(workload, tokens, hidden, dtype, impls[0], impls[1:], lambda: _no_grad(eager, (q, k, cos, sin)))


def liger_rope_peer(rope, q, k, cos, sin) -> Peer:
    """liger_rotary_pos_emb takes transformers' [batch, heads, seq, head_dim] views and rotates
    their storage in place: the timed call rotates its own copies over and over (a rotation keeps
    the values in range), the check a fresh copy."""
    def run(q_, k_):
        with torch.no_grad():
            qo, ko = rope(q_.transpose(1, 2), k_.transpose(1, 2), cos, sin)
        return qo.transpose(1, 2), ko.transpose(1, 2)
    q_own, k_own = q.clone(), k.clone()
    return Peer("liger", call=lambda: run(q_own, k_own), check=lambda: run(q.clone(), k.clone()))


CASES = {"rmsnorm": rms_norm_case, "activation": activation_case, "rotary": rotary_case}


# ---- checking and timing --------------------------------------------------------------------------


def check(case: Case, reference) -> bool:
    """Each peer's outputs against eager's; a peer that differs is not timed. Returns whether
    kbuild's kernel agrees (it is timed either way, and the row says so)."""
    ref_max = max(t.abs().max().item() for t in reference if t.numel())
    for peer in [case.kbuild] + case.peers:
        if peer.call is None:
            continue
        try:
            outs = as_tuple((peer.check or peer.call)())
        except Exception as e:  # noqa: BLE001 - a peer that fails here is absent, with why
            peer.absent, peer.call = f"failed: {type(e).__name__}: {str(e).splitlines()[0][:160]}", None
            continue
        peer.max_diff = max((o.float() - r.float()).abs().max().item() for o, r in zip(outs, reference, strict=True))
        if not agrees(peer.max_diff, ref_max, case.dtype) and peer is not case.kbuild:
            peer.absent, peer.call = f"differs from eager by {peer.max_diff:.3g}: not timed", None
    return case.kbuild.max_diff is not None and agrees(case.kbuild.max_diff, ref_max, case.dtype)


TIMINGS = {
    "launch": "triton.testing.do_bench median",
    # GPU time alone: the calls replay from a CUDA graph, so the host's time per call drops out
    # (and inputs small enough stay in L2, for every peer alike)
    "graph": "triton.testing.do_bench_cudagraph median (GPU time; host time and L2 flush left out)",
    # the same with a cold L2 for every call: a peer that rewrites its input in place (Liger's rotary) keeps a
    # working set that fits in L2 (40 MiB at 4096 tokens) warm across replays, where one that writes new outputs
    # cannot; this timing takes that advantage away, so the two timings together say how much of a gap it is
    "graph-cold": "triton.testing.do_bench_cudagraph median of an L2 flush then the call, less the flush's own "
                  "median (GPU time; host time left out, L2 cold for every call)",
}

FLUSH_MIB = 256  # what triton.testing.do_bench zeroes between calls: above any GPU's L2 today


def timer(device: str, rep_ms: float, cpu_reps: int, timing: str = "launch") -> Callable[[Callable], float]:
    """fn -> median microseconds of one call."""
    if device == "cuda" and timing in ("graph", "graph-cold"):
        from triton.testing import do_bench_cudagraph  # noqa: PLC0415 - optional package: CUDA only

        def graph_time(fn):
            return do_bench_cudagraph(fn, rep=rep_ms, return_mode="median") * 1e3
        if timing == "graph":
            return graph_time
        cache = torch.empty(FLUSH_MIB * 2**20, dtype=torch.int8, device=device)

        def cold(fn):
            def flushed():
                cache.zero_()
                fn()
            return max(0.0, graph_time(flushed) - graph_time(cache.zero_))
        return cold
    if device == "cuda":
        from triton.testing import do_bench  # noqa: PLC0415 - optional package: CUDA only

        return lambda fn: do_bench(fn, warmup=max(1, rep_ms / 4), rep=rep_ms, return_mode="median") * 1e3

    def cpu_time(fn):
        fn()
        times = []
        for _ in range(cpu_reps):
            t = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
        return statistics.median(times) * 1e6
    return cpu_time


def take_turns(peers: list[Peer], rounds: int, time_one, graph: bool = False) -> None:
    """Every timed peer once a round, the order reversed every other round; median of rounds.
    With `graph`, a peer whose calls cannot be captured in a CUDA graph is absent, saying why."""
    timed = [p for p in peers if p.call is not None]
    for n in range(rounds):
        for peer in timed if n % 2 == 0 else reversed(timed):
            if peer.call is None:
                continue
            try:
                peer.rounds.append(time_one(peer.call))
            except Exception as e:  # noqa: BLE001 (only a capture failure gets here: the peer ran and was checked before)
                if not graph:
                    raise
                if torch.cuda.is_available():
                    torch.cuda.synchronize()  # a failed capture's error surfaces here, not in the next peer
                why = (str(e).strip().splitlines() or [type(e).__name__])[0]
                peer.absent, peer.call, peer.rounds = f"not capturable in a CUDA graph: {why}", None, []
    for peer in timed:
        if peer.rounds:
            peer.us = statistics.median(peer.rounds)


def copy_bandwidth(device: str, mib: int, time_one) -> float:
    """GB/s of a device-to-device copy (bytes read + bytes written)."""
    src = torch.empty(mib * 2**20, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    us = statistics.median(time_one(lambda: dst.copy_(src)) for _ in range(3))
    return gb_per_s(2 * src.numel(), us)



# ---- one run ----------------------------------------------------------------------------------------


def run_case(case: Case, args, time_one, copy_gbs: float) -> dict:
    kbuild_agrees = check(case, as_tuple(case.reference()))
    take_turns([case.kbuild] + case.peers, args.rounds, time_one, graph=args.timing.startswith("graph"))
    ratios = speedups(case.kbuild.us, {p.name: p.us for p in case.peers})
    nbytes = bytes_moved(case.workload, case.tokens, case.hidden, torch.empty(0, dtype=case.dtype).element_size())
    row = {"workload": case.workload, "dtype": _dtype_name(case.dtype), "tokens": case.tokens, "hidden": case.hidden,
           "bytes": nbytes, "kbuild": _peer_doc(case.kbuild), "peers": {p.name: _peer_doc(p) for p in case.peers},
           **ratios}
    if case.kbuild.us is not None:
        row["gb_per_s"] = gb_per_s(nbytes, case.kbuild.us)
        row["pct_of_copy"] = 100 * row["gb_per_s"] / copy_gbs
    row["check"] = ("ok" if kbuild_agrees else "DIFFERS" if case.kbuild.max_diff is not None
                    else case.kbuild.absent or "not run")
    return row


def _peer_doc(peer: Peer) -> dict:
    return {"us": peer.us, "rounds_us": peer.rounds, "max_abs_diff": peer.max_diff, "absent": peer.absent}


def _dtype_name(dtype) -> str:
    return next(n for n, d in DTYPES.items() if d == dtype)


def configure_dynamo() -> None:
    # Each shape and dtype compiles afresh (torch._dynamo.reset() per case); a hit on the recompile
    # limit must raise, not run the eager code under torch.compile's name.
    import torch._dynamo.config as dynamo

    dynamo.cache_size_limit = 64
    if hasattr(dynamo, "fail_on_recompile_limit_hit"):
        dynamo.fail_on_recompile_limit_hit = True


def run(args) -> dict:
    wanted = {WORKLOADS[w] for w in args.workloads}
    kernels = load_kernels(wanted, args.device, dict(args.variant_dir))
    liger = load_liger(args.device)
    configure_dynamo()
    time_one = timer(args.device, args.rep_ms, args.cpu_reps, args.timing)
    # the ceiling is timed as launched in both timings: a 1 GiB copy is never host-bound, and
    # do_bench_cudagraph gave it 2.71 TB/s on the H200 where the copy runs at 4.25 (run18), which
    # put graph-timed kernels at 150 % of "the copy"
    copy_gbs = copy_bandwidth(args.device, args.copy_mib, timer(args.device, args.rep_ms, args.cpu_reps, "launch"))
    doc = environment(args, kernels, liger, copy_gbs)
    print(f"copy bandwidth ({args.copy_mib} MiB dst.copy_(src)): {copy_gbs:.0f} GB/s", flush=True)
    for dtype_name in args.dtypes:
        for tokens, hidden in args.shapes:
            torch._dynamo.reset()  # this shape's compiles only: well under the recompile limit
            for workload in args.workloads:
                if isinstance(kernels[WORKLOADS[workload]], str):
                    continue  # reported once, in doc["kernels_absent"]
                t0 = time.perf_counter()
                make = CASES[WORKLOADS[workload]]
                case = make(workload, tokens, hidden, DTYPES[dtype_name], args.device, kernels, liger,
                            not args.no_compile)
                row = run_case(case, args, time_one, copy_gbs)
                row["wall_s"] = time.perf_counter() - t0
                doc["rows"].append(row)
                print(progress_line(row), flush=True)
                del case
    doc["wall_s"] = time.perf_counter() - doc.pop("_t0")
    return doc


def environment(args, kernels, liger, copy_gbs) -> dict:
    gpu = torch.cuda.get_device_name() if args.device == "cuda" else None
    try:
        import triton  # noqa: PLC0415 - optional package: a CPU torch comes without it
        triton_version = triton.__version__
    except ImportError:
        triton_version = None
    return {"_t0": time.perf_counter(), "device": args.device, "gpu": gpu,
            "cpu": platform.processor() or platform.machine(), "torch": torch.__version__, "triton": triton_version,
            "python": platform.python_version(), "liger": liger.get("version"), "liger_absent": liger["absent"],
            "kernels": {n: str(Path(m.__file__).parent) for n, m in kernels.items() if not isinstance(m, str)},
            "kernels_absent": {n: why for n, why in kernels.items() if isinstance(why, str)},
            "recompile_limit_raises": hasattr(torch._dynamo.config, "fail_on_recompile_limit_hit"),
            "copy_gb_per_s": copy_gbs, "copy_mib": args.copy_mib, "rounds": args.rounds,
            "timing": TIMINGS[args.timing] if args.device == "cuda" else "perf_counter median",
            "rows": []}


def progress_line(row: dict) -> str:
    k = row["kbuild"]["us"]
    best = row["best_peer"]
    vs = f"{row['vs_best']:.2f}x vs {best}" if best else "no peer timed"
    return (f"  {row['workload']:<27} {row['dtype']} {row['tokens']}x{row['hidden']}: kbuild "
            f"{'absent' if k is None else f'{k:.1f} us'}, {vs} ({row['wall_s']:.1f} s)")


# ---- the table ------------------------------------------------------------------------------------


def table_rows(doc: dict) -> list[list[str]]:
    rows = []
    for r in doc["rows"]:
        k = r["kbuild"]["us"]
        cells = [r["workload"], r["dtype"], f"{r['tokens']}x{r['hidden']}", "-" if k is None else f"{k:.1f}"]
        for name in PEERS:
            p = r["peers"][name]
            cells.append("-" if p["us"] is None else f"{p['us']:.1f} ({r['vs'][name]:.2f}x)")
        cells.append("-" if r["vs_best"] is None else f"{r['vs_best']:.2f}x {r['best_peer']}")
        cells.append(f"{r.get('gb_per_s', 0):.0f} / {r.get('pct_of_copy', 0):.0f}%")
        cells.append(r["check"])
        rows.append(cells)
    return rows


HEADER = ["workload", "dtype", "shape", "kbuild us", *[f"{p} us" for p in PEERS], "vs best", "GB/s / copy", "check"]


def absent_reasons(doc: dict) -> list[str]:
    seen: dict[str, list[str]] = {}  # reason: the workloads it was given for
    for r in doc["rows"]:
        for name, p in r["peers"].items():
            if p["absent"]:
                seen.setdefault(f"{name}: {p['absent']}", []).append(r["workload"])
    return [f"{reason} [{', '.join(sorted(set(w)))}]" for reason, w in seen.items()]


def print_table(doc: dict) -> None:
    title = (f"kbuild vs peers on {doc['gpu'] or doc['cpu']} (torch {doc['torch']}, liger {doc['liger'] or 'absent'}); "
             f"median us (kbuild's speed-up); copy bandwidth {doc['copy_gb_per_s']:.0f} GB/s; {doc['timing']}")
    try:
        from rich.console import Console  # noqa: PLC0415 - optional package: a plain table without it
        from rich.table import Table  # noqa: PLC0415 - optional package
    except ImportError:
        print(title)
        for cells in [HEADER] + table_rows(doc):
            print(" | ".join(cells))
    else:
        table = Table(title=title, box=None, pad_edge=False)
        for name in HEADER:
            table.add_column(name, justify="left" if name in ("workload", "dtype", "shape", "check") else "right")
        for cells in table_rows(doc):
            table.add_row(*cells)
        Console(width=max(200, Console().width)).print(table)
    for name, why in doc["kernels_absent"].items():
        print(f"  absent  kbuild {name} (its workloads not run): {why}")
    for reason in absent_reasons(doc):
        print(f"  absent  {reason}")


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        doc = run(args)
    except Unavailable as e:
        print(f"bench/peers.py: {e}", file=sys.stderr)
        return 2
    print_table(doc)
    if args.json:
        args.json.write_text(json.dumps(doc, indent=1))
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
