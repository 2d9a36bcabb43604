"""Issue 43 on the H200: transformers 5.25 + kernels 0.19.1 with HF_ENDPOINT at a `kbuild hub serve
--upstream` front whose upstream holds kernels-community's activation v1, rotary v2 and liger-kernels v4,
built unchanged by kbuild (bench/gpu/hf_default.sh sets that up and runs this).

    python hf_default.py make-model DIR
    python hf_default.py ready DIR                 # one from_pretrained on CUDA, timed (a fresh process each)
    python hf_default.py train DIR OUT.json        # default kernelization: what bound, 3 training steps beside
                                                   # use_kernels=False; seed 1's KernelConfig; each layer checked
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from collections.abc import Callable
from importlib.metadata import version
from typing import Any

import torch  # noqa: TID253 - runs on the GPU image: torch is what it measures

DTYPE = torch.float32  # gradients compared in fp32: a difference is the kernel's, not rounding
IDS_SHAPE = (2, 256)


def make_model(folder: str) -> dict:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=32000, hidden_size=1024, intermediate_size=2816, num_hidden_layers=8,
                         num_attention_heads=16, num_key_value_heads=4, max_position_embeddings=2048,
                         tie_word_embeddings=False)
    LlamaForCausalLM(config).save_pretrained(folder)
    return {"saved": folder, "params": sum(p.numel() for p in LlamaForCausalLM(config).parameters())}


def ready(folder: str) -> dict:
    t0 = time.perf_counter()
    from transformers import AutoModelForCausalLM
    t1 = time.perf_counter()
    model = AutoModelForCausalLM.from_pretrained(folder, device_map="cuda", dtype=DTYPE)
    torch.cuda.synchronize()
    t2 = time.perf_counter()
    return {"import_s": t1 - t0, "from_pretrained_s": t2 - t1, "kernelized": kernelized(model)}


def kernelized(model) -> dict:
    from kernels import get_kernelized_layers

    found = get_kernelized_layers(model)
    names: dict[str, list[str]] = {}  # repo: the layers and functions bound to it
    for name, layer in found.layers.items():
        names.setdefault(str(layer.repo), []).append(name)
    for (name, func), entry in found.funcs.items():
        names.setdefault(str(entry.repo), []).append(f"{name}:{func}")
    return {repo: len(where) for repo, where in names.items()}


def batch(vocab: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(1)
    return torch.randint(0, vocab, IDS_SHAPE, generator=g).cuda()


def steps(model, ids, n=3) -> tuple[list[float], dict[str, torch.Tensor]]:
    """n AdamW steps; the losses, and the first step's gradients."""
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    losses, first = [], {}
    for i in range(n):
        opt.zero_grad(set_to_none=True)
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        if i == 0:
            first = {k: p.grad.detach().clone() for k, p in model.named_parameters() if p.grad is not None}
        opt.step()
        losses.append(loss.item())
    return losses, first


def layer_checks() -> dict:
    """Each kernels-community layer transformers binds, against transformers' own code, forward and backward."""
    from kernels import get_kernel
    from transformers.models.llama.modeling_llama import LlamaRMSNorm, apply_rotary_pos_emb

    out = {}
    torch.manual_seed(2)
    # Liger's RMSNorm (the layer's forward on a LlamaRMSNorm, as kernelize binds it)
    liger = get_kernel("kernels-community/liger-kernels", version=4)
    for dtype in (torch.float32, torch.bfloat16):
        norm = LlamaRMSNorm(1024, eps=1e-6).cuda().to(dtype)
        with torch.no_grad():
            norm.weight.uniform_(0.5, 1.5)
        x = torch.randn(512, 1024, device="cuda", dtype=dtype, requires_grad=True)
        dy = torch.randn(512, 1024, device="cuda", dtype=dtype)
        ref = norm(x)
        gx_ref, gw_ref = torch.autograd.grad(ref, (x, norm.weight), dy)
        got = liger.layers.LigerRMSNorm.forward(norm, x)
        gx, gw = torch.autograd.grad(got, (x, norm.weight), dy)
        out[f"liger_rmsnorm_{str(dtype)[6:]}"] = {"out": rel(got, ref), "grad_x": rel(gx, gx_ref),
                                                  "grad_w": rel(gw, gw_ref)}
    # kernels-community rotary's apply_rotary_transformers (the layer transformers binds for rotary_pos_emb)
    rotary = get_kernel("kernels-community/rotary", version=2)
    b, h, kvh, s, d = 2, 16, 4, 256, 64
    q = torch.randn(b, h, s, d, device="cuda", requires_grad=True)
    k = torch.randn(b, kvh, s, d, device="cuda", requires_grad=True)
    pos = torch.arange(s, device="cuda", dtype=torch.float32)
    inv = 1.0 / (10000 ** (torch.arange(0, d, 2, device="cuda", dtype=torch.float32) / d))
    freqs = torch.outer(pos, inv)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos()[None].expand(b, s, d), emb.sin()[None].expand(b, s, d)
    dq, dk = torch.randn_like(q), torch.randn_like(k)
    rq, rk = apply_rotary_pos_emb(q, k, cos, sin)
    gq_ref, gk_ref = torch.autograd.grad((rq, rk), (q, k), (dq, dk))
    kq, kk = rotary.layers.apply_rotary_transformers().forward(q, k, cos, sin)
    gq, gk = torch.autograd.grad((kq, kk), (q, k), (dq, dk))
    # what an autograd that ignored the rotation would give: the output gradient as it is
    out["rotary"] = {"out_q": rel(kq, rq), "out_k": rel(kk, rk), "grad_q": rel(gq, gq_ref), "grad_k": rel(gk, gk_ref),
                     "grad_q_vs_identity": rel(gq, dq)}
    # activation's Silu (bound for inference only)
    act = get_kernel("kernels-community/activation", version=1)
    x = torch.randn(512, 2816, device="cuda")
    out["silu"] = {"out": rel(act.layers.Silu().forward(x), torch.nn.functional.silu(x))}
    return out


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.float(), b.float()
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()


def train(folder: str, out_path: str) -> dict:
    """Each part writes what it found to `out_path` as it ends; a part that fails records its error
    and the next still runs."""
    report = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(),
              "versions": {d: version(d) for d in ("transformers", "kernels", "huggingface_hub")}}
    for name, part in (("default", default_kernelization), ("seed1", seed1), ("layers", lambda _: layer_checks())):
        try:
            report[name] = part(folder)
        except Exception as e:  # noqa: BLE001 - recorded, and the next part runs
            report[name] = {"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()[-3000:]}
        with open(out_path, "w") as f:
            json.dump(report, f, indent=2)
    return report


def default_kernelization(folder: str) -> dict:
    """A plain from_pretrained on CUDA (kernelizes by default), beside use_kernels=False: logits, then
    3 training steps each, and the first step's gradients parameter by parameter."""
    from transformers import AutoModelForCausalLM

    out: dict[str, Any] = {}
    t0 = time.perf_counter()
    model = AutoModelForCausalLM.from_pretrained(folder, device_map="cuda", dtype=DTYPE)
    out["from_pretrained_s"] = time.perf_counter() - t0
    out["kernelized_inference"] = kernelized(model)
    ref = AutoModelForCausalLM.from_pretrained(folder, device_map="cuda", dtype=DTYPE, use_kernels=False)
    ids = batch(model.config.vocab_size)
    with torch.no_grad():
        model.eval(), ref.eval()
        out["logits_rel"] = rel(model(ids).logits, ref(ids).logits)
    losses_k, grads_k = steps(model, ids)
    out["kernelized_training"] = kernelized(model)
    losses_r, grads_r = steps(ref, ids)
    out["losses_kernels"], out["losses_reference"] = losses_k, losses_r
    diffs = sorted(((rel(grads_k[n], grads_r[n]), n) for n in grads_r), reverse=True)
    out["grad_rel_top"] = [[n, d] for d, n in diffs[:12]]
    out["grad_rel_over_1e-3"] = sum(1 for d, _ in diffs if d > 1e-3)
    out["params"] = len(diffs)
    return out


def seed1(folder: str) -> dict:
    """Seed 1's form: only RMSNorm mapped to Liger through KernelConfig's string form (version 1)."""
    from transformers import AutoModelForCausalLM, KernelConfig

    config = KernelConfig(kernel_mapping={"RMSNorm": "kernels-community/liger-kernels:LigerRMSNorm"})
    seed = AutoModelForCausalLM.from_pretrained(folder, device_map="cuda", dtype=DTYPE, use_kernels=True,
                                                kernel_config=config).eval()
    plain = AutoModelForCausalLM.from_pretrained(folder, device_map="cuda", dtype=DTYPE, use_kernels=False).eval()
    ids = batch(seed.config.vocab_size)
    norms = sum(1 for _, m in seed.named_modules() if type(m).__name__.endswith("RMSNorm"))
    with torch.no_grad():
        return {"kernelized": kernelized(seed), "norms_in_model": norms,
                "logits_rel": rel(seed(ids).logits, plain(ids).logits)}


def main(argv: list[str]) -> None:
    handlers: dict[str, Callable[..., dict]] = {"make-model": make_model, "ready": ready, "train": train}
    print("RESULT " + json.dumps(handlers[argv[0]](*argv[1:])), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
