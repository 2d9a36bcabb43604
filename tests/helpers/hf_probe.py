"""Runs inside a Hugging Face environment (tests/helpers/hf_envs.py), against the hub at HF_ENDPOINT: loads
kbuild-built kernels through `kernels` and transformers, and prints one JSON line of what it saw
(the file each kernel was imported from, the kernel ops that ran, the largest difference from a
reference) for tests/integration/test_hf_transformers.py to judge. Exits non-zero with a traceback on any error.

    python hf_probe.py get-kernel REPO VERSION REVISION
    python hf_probe.py layer REPO VERSION LAYER
    python hf_probe.py attention ORG/REPO@REV
"""

from __future__ import annotations

import json
import sys
import tempfile
from importlib import metadata

import torch


def ran_ops(fn) -> tuple[object, list[str]]:
    """fn()'s result and the names of the custom (namespaced, non-aten) ops the profiler saw run."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        result = fn()
    names = {e.key for e in prof.key_averages() if "::" in e.key and not e.key.startswith(("aten::", "profiler::"))}
    return result, sorted(names)


def get_kernel(repo: str, version: str, revision: str) -> dict:
    import kernels

    x, w = torch.randn(8, 64), torch.rand(64) + 0.5
    ref = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w
    report = {}
    for how, pin in (("version", {"version": int(version)}), ("revision", {"revision": revision})):
        k = kernels.get_kernel(repo, backend="cpu", trust_remote_code=True, **pin)
        out, ops = ran_ops(lambda k=k: k.rms_norm(x, w, 1e-6))
        report[how] = {"file": k.__file__, "module": k.__name__, "ops": ops,
                       "max_err": (out - ref).abs().max().item()}
    return report


def tiny_llama(**overrides):
    """A 2-layer Llama built from a config (random weights, nothing downloaded). Heads == KV heads:
    flash-attn2's CPU fallback has no grouped-query attention."""
    from transformers import LlamaConfig

    return LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=64, **overrides)


def layer(repo: str, version: str, layer_name: str) -> dict:
    """transformers' own kernelize (what `use_kernels=True` runs) with a kernels mapping that sends
    the Llama's RMSNorm (`@use_kernel_forward_from_hub("RMSNorm")`) to our repo. KernelConfig can
    not say this: both releases accept only accelerator devices there, never "cpu"."""
    from kernels import LayerRepository, Mode, use_kernel_mapping
    from transformers import LlamaForCausalLM
    from transformers.integrations.hub_kernels import kernelize

    torch.manual_seed(0)
    model = LlamaForCausalLM(tiny_llama(rms_norm_eps=1e-5)).eval()
    ids = torch.randint(0, 128, (2, 12))
    with torch.no_grad():
        ref = model(ids).logits
    mapping = {"RMSNorm": {"cpu": LayerRepository(repo_id=repo, layer_name=layer_name, version=int(version),
                                                  trust_remote_code=True)}}
    with use_kernel_mapping(mapping, inherit_mapping=False):
        # the mode said, as from_pretrained(use_kernels=True) says it: transformers 5.25 no longer
        # derives one for a model built from a config (its kernels_mode is None)
        kernelize(model, mode=Mode.INFERENCE)
    forward = model.model.norm.forward
    with torch.no_grad():
        out, ops = ran_ops(lambda: model(ids).logits)
    module = sys.modules[getattr(forward, "__func__", forward).__module__]
    return {"forward_module": module.__name__, "file": module.__file__, "ops": ops,
            "max_err": (out - ref).abs().max().item()}


def attention(implementation: str) -> dict:
    """A padded batch through the tiny Llama with `attn_implementation=<our repo>` against the same
    weights under sdpa. With padding transformers calls the kernel's flash_attn_varlen_func (the
    one flash-attn2 implements on CPU); the padded positions are left out of the comparison."""
    from transformers import LlamaForCausalLM

    torch.manual_seed(0)
    sdpa = LlamaForCausalLM(tiny_llama(attn_implementation="sdpa")).to(torch.bfloat16).eval()
    with torch.no_grad():
        # sharper attention than the random init's (near uniform): a kernel that gets the softmax
        # scale or the mask wrong then moves the logits by ~0.2, against bf16 rounding's ~0.005
        for block in sdpa.model.layers:
            block.self_attn.q_proj.weight.mul_(10)
            block.self_attn.k_proj.weight.mul_(10)
    with tempfile.TemporaryDirectory() as saved:
        # from_pretrained, as users load a model: the one path that takes allow_all_kernels (the
        # repo is outside kernels-community) in both releases
        sdpa.save_pretrained(saved)
        flash = LlamaForCausalLM.from_pretrained(saved, attn_implementation=implementation, allow_all_kernels=True,
                                                 dtype=torch.bfloat16).eval()
    ids = torch.randint(0, 128, (3, 10))
    mask = torch.ones_like(ids)
    mask[0, :4] = 0  # left padding, as generation pads
    mask[1, :1] = 0
    with torch.no_grad():
        ref = sdpa(ids, attention_mask=mask).logits
        out, ops = ran_ops(lambda: flash(ids, attention_mask=mask).logits)
    keep = mask.bool()
    loaded = [m for name, m in sys.modules.items() if name.startswith("_flash_attn2") and "." not in name]
    return {"attn_implementation": flash.config._attn_implementation, "ops": ops,
            "files": [m.__file__ for m in loaded],
            "max_err": (out[keep].float() - ref[keep].float()).abs().max().item(),
            "ref_scale": ref[keep].float().abs().max().item()}


def main(argv: list[str]) -> int:
    commands = {"get-kernel": get_kernel, "layer": layer, "attention": attention}
    if not argv or argv[0] not in commands:
        print(f"usage: hf_probe.py {{{'|'.join(commands)}}} ARGS...", file=sys.stderr)
        return 2
    report = commands[argv[0]](*argv[1:])
    # what this environment really holds, for the test to hold against its pins
    report["installed"] = {name: metadata.version(name) for name in ("torch", "kernels", "transformers")}
    report["torch_cuda"] = torch.version.cuda
    # transformers turns its kernels integration into no-ops for a `kernels` outside its range
    from transformers.utils.import_utils import is_kernels_available

    report["transformers_takes_kernels"] = is_kernels_available()
    print("PROBE " + json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
