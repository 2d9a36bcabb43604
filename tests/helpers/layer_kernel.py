"""A pure-Python kernel with layers, built and published with the real CLI, for the layer API tests
(tests/integration/test_runtime_layers.py, test_layer_api.py, test_layer_api_parity.py).

Its layers: RMSNorm (a Llama RMSNorm written another way: reads the host's weight and
variance_epsilon; can_torch_compile), NormNoBackward (has_backward = False), Version (returns the
kernel's version), Axpy (for a function layer: `axpy(x, y, alpha=1.0)`, counted), RotaryPosEmb (for
transformers' apply_rotary_pos_emb, written another way, counted), and three that are no drop-in: Stateful (own constructor), TwoArgs (another
number of arguments), KeywordOnly (another kind of argument)."""

from __future__ import annotations

from pathlib import Path

from runtime_hubs import Kernel, git

LAYERS = '''import torch
from torch import nn

CALLS = {{"RMSNorm": 0, "NormNoBackward": 0, "Axpy": 0, "RotaryPosEmb": 0}}


class RMSNorm(nn.Module):
    can_torch_compile = True

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        CALLS["RMSNorm"] += 1
        x = hidden_states.float()
        x = x / torch.sqrt(torch.mean(x * x, dim=-1, keepdim=True) + self.variance_epsilon)
        return self.weight * x.to(hidden_states.dtype)


class NormNoBackward(nn.Module):
    has_backward = False

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        CALLS["NormNoBackward"] += 1
        with torch.no_grad():
            x = hidden_states.float()
            return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.variance_epsilon))


class Version(nn.Module):
    def forward(self) -> int:
        return {version}


class Axpy(nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor, alpha: float = 1.0) -> torch.Tensor:
        CALLS["Axpy"] += 1
        return torch.add(y, x, alpha=alpha)


class RotaryPosEmb(nn.Module):
    def forward(self, q, k, cos, sin, unsqueeze_dim=1):
        CALLS["RotaryPosEmb"] += 1
        cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)
        half = q.shape[-1] // 2

        def rotated(x):
            x1, x2 = x[..., :half], x[..., half:]
            return torch.cat((x1 * cos[..., :half] - x2 * sin[..., :half],
                              x2 * cos[..., half:] + x1 * sin[..., half:]), dim=-1)

        return rotated(q), rotated(k)


class Stateful(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = 2.0

    def forward(self, hidden_states):
        return hidden_states


class TwoArgs(nn.Module):
    def forward(self, hidden_states, residual):
        return hidden_states + residual


class KeywordOnly(nn.Module):
    def forward(self, *, hidden_states):
        return hidden_states
'''
INIT = "from . import layers\nfrom ._ops import ops\n\n__all__ = [\"layers\"]\n"


def publish_layer_kernel(root: Path, hub, repo_id: str = "org/rmsnorm", versions=(1,)) -> Kernel:
    """Build and publish one branch per version (v1, v2, ...) of the layer kernel to `hub` (a
    folder or URL)."""
    kernel = Kernel(root, repo_id=repo_id)
    for version in versions:
        kernel.write(version=version)
        package = kernel.root / "torch-ext" / "tiny"
        (package / "__init__.py").write_text(INIT)
        (package / "layers.py").write_text(LAYERS.format(version=version))
        git(kernel.root, "add", "-A")
        git(kernel.root, "commit", "-q", "-m", f"layers v{version}")
        kernel.build().publish(hub)
    return kernel
