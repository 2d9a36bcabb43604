"""Issue 32, part 3, on the GPU (on a machine without one, a small CPU run of the same steps, to
try the script): a transformers Llama (random weights, from a config) trained one
step with its RMSNorms swapped by kbuild's layer API for kbuild/rmsnorm's CUDA layer, fetched from
`kbuild hub serve` (HF_ENDPOINT), against the same model untouched. Written as a user of Hugging
Face's `kernels` layer API writes it, with `kbuild` in place of `kernels`. Prints one JSON object.

    python bench/gpu/layer_training.py OUT.json [DTYPE]     (DTYPE: bfloat16 on a GPU, else float32)
"""

from __future__ import annotations

import copy
import json
import sys
import time
from typing import Any

import torch  # noqa: TID253 - a training step on the GPU image: torch is what it runs
from transformers import LlamaConfig, LlamaForCausalLM  # noqa: TID253 - as torch
from transformers.models.llama.modeling_llama import LlamaRMSNorm  # noqa: TID253 - as torch

from kbuild import (
    CUDAProperties,
    Device,
    LayerRepository,
    Mode,
    kernelize,
    register_kernel_mapping,
    replace_kernel_forward_from_hub,
)

if getattr(LlamaRMSNorm, "kernel_layer_name", None) is None:  # transformers marks it only when `kernels` is there
    replace_kernel_forward_from_hub(LlamaRMSNorm, "RMSNorm")

GPU = torch.cuda.is_available()
device, dtype = ("cuda", torch.bfloat16) if GPU else ("cpu", torch.float32)
if len(sys.argv) > 2:  # float32 on the GPU tells the kernel's own error from bf16 rounding
    dtype = getattr(torch, sys.argv[2])
here = None
if GPU:
    major, minor = torch.cuda.get_device_capability()
    here = major * 10 + minor
    register_kernel_mapping({"RMSNorm": {
        # the narrowest range holding this GPU wins; the catch-all entry names a layer that is not there
        Device("cuda", CUDAProperties(min_capability=here, max_capability=here)):
            LayerRepository("kbuild/rmsnorm", layer_name="RMSNorm", version=1),
        "cuda": LayerRepository("kbuild/rmsnorm", layer_name="NoSuchLayer", version=1),
    }})
else:
    register_kernel_mapping({"RMSNorm": {"cpu": LayerRepository("kbuild/rmsnorm", layer_name="RMSNorm", version=1)}})

size = dict(hidden_size=2048, intermediate_size=5632, num_hidden_layers=4, num_attention_heads=16) if GPU else \
    dict(hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4)
config = LlamaConfig(vocab_size=32000, num_key_value_heads=4, max_position_embeddings=2048, **size)
torch.manual_seed(0)
reference = LlamaForCausalLM(config).to(device, dtype)
for module in reference.modules():
    if isinstance(module, LlamaRMSNorm):
        with torch.no_grad():
            module.weight.uniform_(0.5, 1.5)
patched = copy.deepcopy(reference)
t0 = time.perf_counter()
kernelize(patched, mode=Mode.TRAINING, device=device)
kernelize_s = time.perf_counter() - t0
norms = [m for m in patched.modules() if isinstance(m, LlamaRMSNorm)]
bound = sorted({m.forward.__func__.__module__ + "." + m.forward.__func__.__qualname__ for m in norms})

ids = torch.randint(0, config.vocab_size, (4, 1024 if GPU else 64), device=device)
result: dict[str, Any]
result = {"dtype": str(dtype).removeprefix("torch."), "gpu": torch.cuda.get_device_name() if GPU else None,
          "capability": here, "torch": torch.__version__, "norms": len(norms), "bound": bound,
          "kernelize_s": round(kernelize_s, 3), "steps": []}
optimizers = [torch.optim.AdamW(m.parameters(), lr=1e-4) for m in (reference, patched)]
for step in range(3):
    losses, grads = [], []
    for model, optimizer in zip((reference, patched), optimizers, strict=True):
        optimizer.zero_grad(set_to_none=True)
        if step == 0 and model is patched:
            activities = [torch.profiler.ProfilerActivity.CPU] + [torch.profiler.ProfilerActivity.CUDA] * GPU
            with torch.profiler.profile(activities=activities) as prof:
                loss = model(input_ids=ids, labels=ids).loss
                loss.backward()
            result["kernel_ops"] = sorted({e.key for e in prof.key_averages() if "rms" in e.key.lower()})[:12]
        else:
            loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
        losses.append(loss.item())
        grads.append({n: p.grad.float() for n, p in model.named_parameters() if p.grad is not None})
        optimizer.step()
    worst = max(((a - grads[1][n]).norm() / a.norm().clamp_min(1e-12)).item() for n, a in grads[0].items())
    norm_grads = [n for n in grads[0] if "norm" in n]
    worst_norm = max(((grads[0][n] - grads[1][n]).norm() / grads[0][n].norm()).item() for n in norm_grads)
    result["steps"].append({"loss_reference": losses[0], "loss_kbuild": losses[1],
                            "max_rel_grad_diff": worst, "max_rel_norm_weight_grad_diff": worst_norm})
json.dump(result, open(sys.argv[1], "w"), indent=2)
print(json.dumps(result, indent=2))
