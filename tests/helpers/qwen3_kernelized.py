"""transformers' own Qwen3 (tiny), kernelized by kbuild: its RMSNorm classes and its
apply_rotary_pos_emb function layer, marked by whichever library is installed (Hugging Face's
`kernels` when transformers finds it, else kbuild's decorators, as bench/gpu/qwen_step.py does),
mapped to the layers of tests/helpers/layer_kernel.py's kernel in a local folder. Prints one JSON
object: what each forward ran and how the outputs and gradients compare with the model's own.

    python qwen3_kernelized.py KERNEL_DIR
"""

from __future__ import annotations

import json
import sys

import torch
from transformers import Qwen3Config, Qwen3ForCausalLM
from transformers.models.qwen3 import modeling_qwen3

import kbuild
from kbuild import LocalLayerRepository, Mode

kernel_dir = sys.argv[1]
marked_by = "kernels" if getattr(modeling_qwen3.apply_rotary_pos_emb, "kernel_layer_name", None) else "kbuild"
if marked_by == "kbuild":  # transformers without `kernels` leaves them unmarked
    kbuild.replace_kernel_forward_from_hub(modeling_qwen3.Qwen3RMSNorm, "RMSNorm")
    modeling_qwen3.apply_rotary_pos_emb = kbuild.use_kernel_forward_from_hub("rotary_pos_emb")(
        modeling_qwen3.apply_rotary_pos_emb)
    kbuild.use_kernelized_func(modeling_qwen3.apply_rotary_pos_emb)(modeling_qwen3.Qwen3Attention)

config = Qwen3Config(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                     num_key_value_heads=2, head_dim=16, vocab_size=100, attn_implementation="sdpa")
torch.manual_seed(0)
model, reference = Qwen3ForCausalLM(config).train(), Qwen3ForCausalLM(config).train()
reference.load_state_dict(model.state_dict())
ids = torch.randint(0, 100, (2, 12), generator=torch.Generator().manual_seed(0))
theirs = reference(ids, labels=ids)  # before kernelize: a function layer is one for every model
theirs.loss.backward()
mapping = {"RMSNorm": {"cpu": LocalLayerRepository(kernel_dir, layer_name="RMSNorm")},
           "rotary_pos_emb": {"cpu": LocalLayerRepository(kernel_dir, layer_name="RotaryPosEmb")}}
kbuild.kernelize(model, mapping, mode=Mode.TRAINING, device="cpu")
kernel = next(m for name, m in sys.modules.items() if name.endswith(".layers") and hasattr(m, "CALLS"))
rotary_layers = {id(f): f for m in model.modules() for f in getattr(m, "_kernel_funcs", {}).values()}
before = dict(kernel.CALLS)
ours = model(ids, labels=ids)
ours.loss.backward()
calls = {k: kernel.CALLS[k] - before[k] for k in ("RMSNorm", "RotaryPosEmb")}
grads = [torch.allclose(a.grad, b.grad, rtol=1e-4, atol=1e-5)
         for a, b in zip(model.parameters(), reference.parameters(), strict=True)]
print(json.dumps({
    "marked_by": marked_by,
    "rotary_layers": len(rotary_layers),
    "rotary_runs": sorted({f.forward.__func__.__qualname__ for f in rotary_layers.values()}),
    "calls": calls,
    "logits_match": bool(torch.allclose(ours.logits, theirs.logits, rtol=1e-4, atol=1e-5)),
    "grads_match": all(grads),
    "norms": sum(isinstance(m, modeling_qwen3.Qwen3RMSNorm) for m in model.modules()),
}))
