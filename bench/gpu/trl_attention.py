"""The TRL page's attention path, measured: transformers loads flash-attn2 from a hub
(`attn_implementation="kernels-community/flash-attn2@v3"`, HF_ENDPOINT = `kbuild hub serve`) and a
Qwen3-shaped model trains with it, against transformers' own sdpa and eager attention.

    python bench/gpu/trl_attention.py --out results.json [--seq 4096] [--layers 8]
    python bench/gpu/trl_attention.py --ready cold|warm --loader hf|kbuild --out ready.json
    python bench/gpu/trl_attention.py --make-model DIR --out model.json
    python bench/gpu/trl_attention.py --ready cold|warm --loader transformers --model DIR --out ready.json

For MHA (kv heads = heads) and GQA (kv heads = heads / 4), each implementation builds the same
model (same seed, bf16) and takes the same batch: one step's loss and gradients are compared with
sdpa's (the reference), then `--steps` timed optimizer steps give step time, tokens/s and peak
memory. `--ready` measures, in this fresh process, the time from nothing imported to a kernel
that computed once, through `--loader hf` (Hugging Face's `kernels.get_kernel`, what transformers
calls) or `--loader kbuild` (kbuild's `get_kernel`), each with its own cache folder (cold: empty;
warm: filled by an earlier process). One loader per process: both would register the same ops.
`--loader transformers` is the TRL page's own call: `from_pretrained(DIR, attn_implementation=KERNEL)` of the
GQA model `--make-model` saved, on CUDA, until one forward computed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path


def qwen3_config(kv_heads: int, layers: int):
    from transformers import Qwen3Config

    # Qwen3-0.6B's shape (hidden 1024, 16 heads of 128, MLP 3072, its vocabulary), fewer layers
    return Qwen3Config(vocab_size=151936, hidden_size=1024, intermediate_size=3072, num_hidden_layers=layers,
                       num_attention_heads=16, num_key_value_heads=kv_heads, head_dim=128,
                       max_position_embeddings=40960, rope_theta=1000000.0, tie_word_embeddings=True)


def build(kv_heads: int, layers: int, attn: str, device: str):
    import torch
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    # as a user writes it: attn_implementation="kernels-community/flash-attn2@v3" loads the hub kernel
    model = AutoModelForCausalLM.from_config(qwen3_config(kv_heads, layers), attn_implementation=attn,
                                             dtype=torch.bfloat16)
    return model.to(device).train()


def batch(seq: int, vocab: int, device: str):
    import torch

    g = torch.Generator().manual_seed(1)
    return torch.randint(0, vocab, (1, seq), generator=g).to(device)


def one_step(model, ids):
    """Loss and the gradient of every parameter after one forward/backward."""
    out = model(input_ids=ids, labels=ids)
    out.loss.backward()
    grads = {n: p.grad.detach().float().clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad(set_to_none=True)
    return out.loss.item(), grads


def timed_steps(model, ids, steps: int):
    import torch

    cuda = ids.is_cuda
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5, fused=cuda)
    def step():
        model(input_ids=ids, labels=ids).loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    for _ in range(2):  # warm-up: kernel autotuning, allocator growth
        step()
    sync()
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        step()
        sync()
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2], torch.cuda.max_memory_allocated() if cuda else 0


def compare(grads, ref):
    """Worst relative L2 difference over the parameters, and the cosine of the whole gradient."""
    worst, dot, na, nb = 0.0, 0.0, 0.0, 0.0
    for name, g in ref.items():
        h = grads[name]
        worst = max(worst, ((h - g).norm() / g.norm().clamp_min(1e-30)).item())
        dot += (h * g).sum().item()
        na += (h * h).sum().item()
        nb += (g * g).sum().item()
    return worst, dot / max((na * nb) ** 0.5, 1e-30)


def train(args) -> dict:
    import torch
    import transformers

    results = {"torch": torch.__version__, "transformers": transformers.__version__,
               "kernels": __import__("kernels").__version__, "device": args.device,
               "gpu": torch.cuda.get_device_name() if args.device == "cuda" else None,
               "seq": args.seq, "layers": args.layers, "kernel": args.kernel, "runs": []}
    impls = ["sdpa", "eager", args.kernel] if args.kernel != "none" else ["sdpa", "eager"]
    for label, kv in (("MHA", 16), ("GQA", 4)):
        ref = None
        for impl in impls:
            row = {"attention": label, "kv_heads": kv, "impl": impl}
            try:
                model = build(kv, args.layers, impl, args.device)
                ids = batch(args.seq, model.config.vocab_size, args.device)
                loss, grads = one_step(model, ids)
                row["loss"] = loss
                if impl == "sdpa":
                    ref = (loss, grads)
                elif ref is not None:
                    row["loss_diff_vs_sdpa"] = abs(loss - ref[0])
                    row["grad_rel_l2_max_vs_sdpa"], row["grad_cosine_vs_sdpa"] = compare(grads, ref[1])
                del grads
                step_s, peak = timed_steps(model, ids, args.steps)
                row.update(step_s=step_s, tokens_per_s=args.seq / step_s, peak_gib=peak / 2**30)
            except Exception as e:  # a failing implementation is a result, not the end of the run
                row["error"] = f"{type(e).__name__}: {e}"[:2000]
            print(json.dumps(row), flush=True)
            results["runs"].append(row)
            model = None
            if args.device == "cuda":
                torch.cuda.empty_cache()
    return results


def ready(args) -> dict:
    """From a bare process to a kernel that computed once (see the module docstring)."""
    start = time.perf_counter()
    import torch

    out = {"mode": args.ready, "loader": args.loader, "torch_import_s": time.perf_counter() - start}
    repo, _, rev = args.kernel.partition("@")
    q = torch.randn(1, 256, 16, 128, device="cuda", dtype=torch.bfloat16)
    t0 = time.perf_counter()
    if args.loader == "transformers":  # the page's call, whatever transformers does inside it
        from transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_pretrained(args.model, attn_implementation=args.kernel,
                                                     dtype=torch.bfloat16, device_map="cuda")
        model(input_ids=batch(256, model.config.vocab_size, "cuda"))
        torch.cuda.synchronize()
        out["ready_s"] = time.perf_counter() - t0
        out["attn_implementation"] = model.config._attn_implementation
        return out
    if args.loader == "hf":  # what transformers calls for attn_implementation="org/name@rev"
        import kernels

        kernel = kernels.get_kernel(repo, revision=rev or None)
    else:
        import kbuild  # noqa: PLC0415 - cost: the loader's import is part of ready_s, as kernels' is above

        kernel = kbuild.get_kernel(args.kernel)
    kernel.flash_attn_func(q, q, q, causal=True)
    torch.cuda.synchronize()
    out["ready_s"] = time.perf_counter() - t0
    out["file"] = kernel.__file__
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernel", default="kernels-community/flash-attn2@v3")
    parser.add_argument("--seq", type=int, default=4096)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--device", default="cuda", help="cpu: a dry run of the sdpa/eager lanes (--kernel none)")
    parser.add_argument("--ready", choices=["cold", "warm"])
    parser.add_argument("--loader", choices=["hf", "kbuild", "transformers"], default="hf")
    parser.add_argument("--model", type=Path, help="--loader transformers: the folder --make-model saved")
    parser.add_argument("--make-model", type=Path, help="save the GQA model (sdpa, bf16) there for --model")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    if "HF_ENDPOINT" not in os.environ:
        print("trl_attention.py: set HF_ENDPOINT to the hub (kbuild hub serve)", file=sys.stderr)
        return 2
    if args.make_model:
        model = build(4, args.layers, "sdpa", "cpu")
        model.save_pretrained(args.make_model)
        result = {"saved": str(args.make_model), "params": sum(p.numel() for p in model.parameters())}
    else:
        result = ready(args) if args.ready else train(args)
    args.out.write_text(json.dumps(result, indent=1))
    print(json.dumps({"done": len(result["runs"])} if "runs" in result else result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
