"""Runs inside a Hugging Face environment (tests/helpers/hf_envs.py) against the hub at HF_ENDPOINT (a
`kbuild hub serve --upstream` front): Hugging Face's own clients load a kernel and a model through it,
and one JSON line says what they saw (tests/integration/test_hub_upstream_hf.py judges it).

    python front_probe.py make-model DIR          # a tiny Llama, saved with save_pretrained
    python front_probe.py load KERNEL_REPO SHA MODEL_REPO MODEL_DIR
"""

from __future__ import annotations

import json
import sys
from importlib import metadata

import torch


def tiny_llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=64)
    return LlamaForCausalLM(config)


def make_model(folder: str) -> dict:
    tiny_llama().save_pretrained(folder)
    return {"saved": folder}


def load(kernel_repo: str, sha: str, model_repo: str, model_dir: str) -> dict:
    import kernels
    from huggingface_hub import snapshot_download
    from kernels import LayerRepository, Mode, kernelize, use_kernel_mapping
    from transformers import AutoModelForCausalLM
    from transformers.integrations.hub_kernels import use_kernel_forward_from_hub

    report = {"installed": {d: metadata.version(d) for d in ("kernels", "transformers", "huggingface_hub")}}
    # get_kernel by version, by branch and by commit: the org is trusted upstream, and the front passes
    # the upstream's organisation card through, so no trust_remote_code
    for how, pin in (("version", {"version": 1}), ("branch", {"revision": "v1"}), ("sha", {"revision": sha})):
        k = kernels.get_kernel(kernel_repo, backend="cpu", **pin)
        report[how] = {"file": k.__file__, "version": k.layers.Version()()}

    # a layer from the hub bound by kernelize on the CPU
    @use_kernel_forward_from_hub("RMSNorm")
    class Norm(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.rand(64) + 0.5)
            self.variance_epsilon = 1e-6

        def forward(self, x):
            return self.weight * x  # wrong on purpose: only the hub's layer gives the reference

    mapping = {"RMSNorm": {"cpu": LayerRepository(repo_id=kernel_repo, layer_name="RMSNorm", version=1)}}
    model = torch.nn.Sequential(Norm())
    x = torch.randn(4, 64)
    with use_kernel_mapping(mapping):
        kernelize(model, mode=Mode.INFERENCE, device="cpu")
    ref = model[0].weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6))
    report["layer_max_err"] = (model(x) - ref).abs().max().item()

    # a model: snapshot_download, and transformers' from_pretrained (its default use_kernels on a CPU model)
    folder = snapshot_download(model_repo)
    ids = torch.tensor([[1, 2, 3, 4, 5]])
    direct = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    fetched = AutoModelForCausalLM.from_pretrained(model_repo).eval()
    with torch.no_grad():
        report["logits_max_diff"] = (fetched(ids).logits - direct(ids).logits).abs().max().item()
    report["snapshot"] = folder
    return report


def main(argv: list[str]) -> None:
    handlers = {"make-model": make_model, "load": load}
    print("PROBE " + json.dumps(handlers[argv[0]](*argv[1:])))


if __name__ == "__main__":
    main(sys.argv[1:])
