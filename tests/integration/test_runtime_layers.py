"""kernelize with kbuild's short mapping ({"RMSNorm": "org/rmsnorm@v1:RMSNorm"}): a small Llama-style
model built here gets a published kernel's RMSNorm layer bound onto its norms; outputs and a training
step's gradients match the unpatched model. Nothing is downloaded from outside: the kernel is
published to a local hub by the real `kbuild publish`. Hugging Face's spelling of the same API:
test_layer_api.py."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
from torch import nn

from kbuild import KernelizeFallback, NoVariantFits, kernelize
from kbuild.layers import restore
from layer_kernel import publish_layer_kernel
from runtime_hubs import Kernel, runtime_env, torch_probes

__all__ = ["runtime_env", "torch_probes"]  # fixtures, used by name

pytestmark = pytest.mark.usefixtures("runtime_env")

class LlamaRMSNorm(nn.Module):
    """As in transformers: the hub layer is found through kernel_layer_name."""

    kernel_layer_name = "RMSNorm"

    def __init__(self, hidden: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)


class Block(nn.Module):
    def __init__(self, hidden: int):
        super().__init__()
        self.input_layernorm = LlamaRMSNorm(hidden)
        self.up = nn.Linear(hidden, 4 * hidden, bias=False)
        self.down = nn.Linear(4 * hidden, hidden, bias=False)
        self.post_layernorm = LlamaRMSNorm(hidden)

    def forward(self, x):
        x = x + self.down(nn.functional.silu(self.up(self.input_layernorm(x))))
        return self.post_layernorm(x)


class TinyLlama(nn.Module):
    def __init__(self, vocab: int = 64, hidden: int = 32, layers: int = 2):
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.layers = nn.ModuleList(Block(hidden) for _ in range(layers))
        self.norm = LlamaRMSNorm(hidden)
        self.lm_head = nn.Linear(hidden, vocab, bias=False)

    def forward(self, ids):
        x = self.embed(ids)
        for layer in self.layers:
            x = layer(x)
        return self.lm_head(self.norm(x))


def model() -> TinyLlama:
    torch.manual_seed(0)
    m = TinyLlama()
    with torch.no_grad():
        for module in m.modules():
            if isinstance(module, LlamaRMSNorm):
                module.weight.uniform_(0.5, 1.5)
    return m


@pytest.fixture
def hub(tmp_path) -> Path:
    publish_layer_kernel(tmp_path / "rmsnorm", tmp_path / "hub")
    return tmp_path / "hub"


def calls(m) -> dict:
    norm = m.norm.forward.__func__.__globals__
    return norm["CALLS"]


def test_inference_outputs_match(hub):
    reference, patched = model(), model()
    kernelize(patched, {"RMSNorm": "org/rmsnorm@v1:RMSNorm"}, hub=str(hub))
    ids = torch.randint(0, 64, (3, 7))
    with torch.no_grad():
        expected, got = reference(ids), patched(ids)
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
    assert calls(patched)["RMSNorm"] == 5  # 2 blocks x 2 norms + the final norm
    # Bound per instance: each norm reads its own weight; the class is untouched.
    assert patched.norm.forward.__self__ is patched.norm
    assert patched.layers[0].input_layernorm.forward.__self__ is patched.layers[0].input_layernorm
    assert LlamaRMSNorm.forward.__module__ == __name__
    restore(patched)
    assert "forward" not in patched.norm.__dict__


def test_a_training_step_matches(hub):
    reference, patched = model(), model()
    kernelize(patched, {"RMSNorm": "org/rmsnorm@v1:RMSNorm"}, mode="training", hub=str(hub))
    ids, targets = torch.randint(0, 64, (4, 9)), torch.randint(0, 64, (4, 9))
    grads = []
    for m in (reference, patched):
        optimizer = torch.optim.SGD(m.parameters(), lr=0.1)
        loss = nn.functional.cross_entropy(m(ids).flatten(0, 1), targets.flatten())
        loss.backward()
        grads.append({n: p.grad.clone() for n, p in m.named_parameters()})
        optimizer.step()
    assert calls(patched)["RMSNorm"] == 5
    for name in grads[0]:
        torch.testing.assert_close(grads[1][name], grads[0][name], rtol=1e-4, atol=1e-6, msg=name)
    for (name, a), (_, b) in zip(reference.named_parameters(), patched.named_parameters(), strict=True):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-6, msg=name)


def test_a_layer_without_backward_is_not_used_for_training(hub):
    m = model()
    with pytest.warns(UserWarning, match="keeps its own forward: .*NormNoBackward does not support mode "
                                         r"Mode.TRAINING: it has no backward \(has_backward = False\)"):
        kernelize(m, {"RMSNorm": "org/rmsnorm@v1:NormNoBackward"}, mode="training", hub=str(hub))
    assert "forward" not in m.norm.__dict__
    kernelize(m, {"RMSNorm": "org/rmsnorm@v1:NormNoBackward"}, mode="inference", hub=str(hub))
    with torch.no_grad():
        m(torch.randint(0, 64, (1, 3)))
    assert calls(m)["NormNoBackward"] == 5


def test_torch_compile_respects_can_torch_compile(hub):
    m = model()
    with pytest.warns(UserWarning, match="under torch.compile"):
        kernelize(m, {"RMSNorm": "org/rmsnorm@v1:NormNoBackward"}, torch_compile=True, hub=str(hub))
    assert "forward" not in m.norm.__dict__
    kernelize(m, {"RMSNorm": "org/rmsnorm@v1:RMSNorm"}, torch_compile=True, hub=str(hub))
    assert "forward" in m.norm.__dict__


def test_matching_by_class_name(hub):
    m = model()
    kernelize(m, {"LlamaRMSNorm": "org/rmsnorm@v1:RMSNorm"}, hub=str(hub))  # no kernel_layer_name key
    assert "forward" not in m.norm.__dict__  # kernel_layer_name wins over the class name
    block = Block(8)
    del LlamaRMSNorm.kernel_layer_name
    try:
        kernelize(block, {"LlamaRMSNorm": "org/rmsnorm@v1:RMSNorm"}, hub=str(hub))
    finally:
        LlamaRMSNorm.kernel_layer_name = "RMSNorm"
    assert "forward" in block.input_layernorm.__dict__


def test_no_fit_raises_unless_fallback_allows_it(tmp_path):
    """As in Hugging Face's kernels: a kernel that cannot be loaded is an error by default, and a
    kept forward (with a warning) only with KernelizeFallback.CANNOT_LOAD (in ALL)."""
    kernel = Kernel(tmp_path / "rocm-only", repo_id="org/rocmnorm").write(backends=("rocm",)).build()
    kernel.publish(tmp_path / "hub")
    m = model()
    with pytest.raises(NoVariantFits, match="no variant of org/rocmnorm@v1 fits"):
        kernelize(m, {"RMSNorm": "org/rocmnorm@v1:RMSNorm"}, hub=str(tmp_path / "hub"))
    with pytest.warns(UserWarning, match="RMSNorm keeps its own forward: no variant of org/rocmnorm@v1 fits"):
        kernelize(m, {"RMSNorm": "org/rocmnorm@v1:RMSNorm"}, hub=str(tmp_path / "hub"),
                  use_fallback=KernelizeFallback.ALL)
    assert "forward" not in m.norm.__dict__


def test_mapping_errors(hub):
    with pytest.raises(ValueError, match="is not 'org/repo@v1:LayerName'"):
        kernelize(model(), {"RMSNorm": "org/rmsnorm@v1"}, hub=str(hub))
    with pytest.raises(ValueError, match="mode must be a Mode or one of inference, training, got 'eval'"):
        kernelize(model(), {}, mode="eval")
    with pytest.raises(ValueError, match=r"has no layer 'Nope' \(its layers: Axpy, KeywordOnly, NormNoBackward, "
                                         r"RMSNorm, RotaryPosEmb, Stateful, TwoArgs, Version\)"):
        kernelize(model(), {"RMSNorm": "org/rmsnorm@v1:Nope"}, hub=str(hub))
    with pytest.raises(ValueError, match="is not 'org/repo@v1:LayerName'"):
        kernelize(model(), {"RMSNorm": "org/rmsnorm:RMSNorm"}, hub=str(hub))
