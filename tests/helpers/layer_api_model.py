"""One model script written for Hugging Face's `kernels` layer API, run unchanged on `kernels` or on
kbuild (the library's name is the only argument): layers marked with use_kernel_forward_from_hub,
mappings of LayerRepository by device and Mode, kernelize for inference and training. It loads the
layer kernel of tests/helpers/layer_kernel.py from the hub at HF_ENDPOINT and prints one JSON object
of what happened in each scenario: which layer each module runs, the outputs' agreement with the
module's own forward, and which kind of error a misuse raised.
tests/integration/test_layer_api_parity.py runs it both ways and wants the same JSON.

    python layer_api_model.py kernels|kbuild REPO_ID
"""

from __future__ import annotations

import importlib
import json
import logging
import sys
import warnings

import torch
from torch import nn

lib = importlib.import_module(sys.argv[1])
REPO = sys.argv[2]
logging.disable(logging.WARNING)  # both libraries say fallbacks; this compares what they do
warnings.simplefilter("ignore")


@lib.use_kernel_forward_from_hub("RMSNorm")
class ModelNorm(nn.Module):
    def __init__(self, hidden: int = 16, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.linspace(0.5, 1.5, hidden))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        x = hidden_states.float()
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.variance_epsilon))


@lib.use_kernel_forward_from_hub("Version")
class Version(nn.Module):
    def forward(self) -> int:
        return 0


@lib.use_kernel_forward_from_hub("Unmapped")
class Unmapped(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(1))

    def forward(self, x):
        return x


@lib.use_kernel_forward_from_hub("Axpy")
def axpy(x, y, alpha=1.0):
    return alpha * x + y


@lib.use_kernelized_func(axpy)
class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(16, 16)

    def forward(self, x):
        return axpy(self.proj(x), x, alpha=0.5)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(16, 16)
        self.norm = ModelNorm()
        self.other = Unmapped()

    def forward(self, x):
        return self.other(self.norm(self.proj(x)))


def repo(layer: str = "RMSNorm", **pin):
    return lib.LayerRepository(REPO, layer_name=layer, trust_remote_code=True, **(pin or {"version": 1}))


def runs(module) -> str:
    return module.forward.__func__.__qualname__.split(".")[0]


def error(call) -> str:
    """The built-in kind of error `call` raised ("none" when it raised nothing)."""
    try:
        call()
    except (TypeError, ValueError, FileNotFoundError) as e:
        return next(k.__name__ for k in (TypeError, FileNotFoundError, ValueError) if isinstance(e, k))
    return "none"


Mode = lib.Mode
seen: dict = {}

torch.manual_seed(0)
net, reference = Net(), Net()
reference.load_state_dict(net.state_dict())
x = torch.randn(4, 16)
with lib.use_kernel_mapping({"RMSNorm": {"cpu": repo()}}):
    lib.kernelize(net, mode=Mode.INFERENCE, device="cpu")
    seen["inference"] = [runs(net.norm), runs(net.other), bool(torch.allclose(net(x), reference(x), atol=1e-6))]
    # kernels 0.18+ (and kbuild): which layers a kernel serves, from which repository
    kernelized = getattr(lib, "get_kernelized_layers", None)
    seen["kernelized"] = None if kernelized is None else sorted(
        [name, k.repo.layer_name, k.module is getattr(net, name)] for name, k in kernelized(net).layers.items())
    lib.kernelize(net, mode=Mode.TRAINING, device="cpu")
    net(x).square().sum().backward()
    reference(x).square().sum().backward()
    seen["training"] = [runs(net.norm), bool(torch.allclose(net.norm.weight.grad, reference.norm.weight.grad,
                                                            rtol=1e-4, atol=1e-6))]

modes = {Mode.INFERENCE: repo("NormNoBackward"), Mode.TRAINING: repo()}
with lib.use_kernel_mapping({"RMSNorm": {"cpu": modes}}):
    seen["by_mode"] = [runs(lib.kernelize(Net(), mode=m, device="cpu").norm)
                       for m in (Mode.INFERENCE, Mode.TRAINING, Mode.INFERENCE | Mode.TORCH_COMPILE)]
with lib.use_kernel_mapping({"RMSNorm": {"cpu": {Mode.TRAINING | Mode.TORCH_COMPILE: repo()}}}):
    seen["compile_training_serves_all"] = [
        runs(lib.kernelize(Net(), mode=m, device="cpu").norm)
        for m in (Mode.INFERENCE, Mode.TRAINING, Mode.INFERENCE | Mode.TORCH_COMPILE, Mode.TRAINING | Mode.TORCH_COMPILE)]
with lib.use_kernel_mapping({"RMSNorm": {"cpu": repo("NormNoBackward")}}):  # registered as FALLBACK
    seen["fallback_entry"] = [runs(lib.kernelize(Net(), mode=m, device="cpu").norm)
                              for m in (Mode.INFERENCE, Mode.TRAINING, Mode.INFERENCE | Mode.TORCH_COMPILE)]
    seen["fallback_entry_strict"] = error(lambda: lib.kernelize(Net(), mode=Mode.TRAINING, device="cpu",
                                                                use_fallback=False))
    again = lib.kernelize(Net(), mode=Mode.INFERENCE, device="cpu")
    seen["rebound_then_back"] = [runs(again.norm), runs(lib.kernelize(again, mode=Mode.TRAINING, device="cpu").norm)]
with lib.use_kernel_mapping({"RMSNorm": {"cpu": {Mode.TRAINING: repo("NormNoBackward")}}}):
    seen["registered_training_without_backward"] = error(lambda: lib.kernelize(Net(), mode=Mode.TRAINING,
                                                                              device="cpu"))
with lib.use_kernel_mapping({"RMSNorm": {"cuda": repo()}}):
    seen["other_device"] = runs(lib.kernelize(Net(), mode=Mode.INFERENCE, device="cpu").norm)
    seen["other_device_strict"] = error(lambda: lib.kernelize(Net(), mode=Mode.INFERENCE, device="cpu",
                                                              use_fallback=False))
seen["no_mapping"] = runs(lib.kernelize(Net(), mode=Mode.INFERENCE, device="cpu").norm)
seen["no_mapping_strict"] = error(lambda: lib.kernelize(Net(), mode=Mode.INFERENCE, device="cpu", use_fallback=False))

seen["versions"] = []
for pin in ({"version": 1}, {"version": 2}, {"revision": "v1"}):
    with lib.use_kernel_mapping({"Version": {"cpu": repo("Version", **pin)}}):
        seen["versions"].append(lib.kernelize(Version(), mode=Mode.INFERENCE, device="cpu")())
with lib.use_kernel_mapping({"Version": {"cpu": repo("Version", version=7)}}):
    seen["absent_version"] = error(lambda: lib.kernelize(Version(), mode=Mode.INFERENCE, device="cpu"))

lib.register_kernel_mapping({"Version": {"cpu": repo("Version", version=1)}})
with lib.use_kernel_mapping({"Version": {"cpu": repo("Version", version=2)}}):
    inner = lib.kernelize(Version(), mode=Mode.INFERENCE, device="cpu")()
    with lib.use_kernel_mapping({"RMSNorm": {"cpu": repo()}}, inherit_mapping=False):
        alone = [runs(lib.kernelize(Net(), mode=Mode.INFERENCE, device="cpu").norm),
                 lib.kernelize(Version(), mode=Mode.INFERENCE, device="cpu")()]
seen["contexts"] = [inner, alone, lib.kernelize(Version(), mode=Mode.INFERENCE, device="cpu")()]

blocks = nn.Sequential(Block(), Block())
expected = blocks(x)
with lib.use_kernel_mapping({"Axpy": {"cpu": repo("Axpy")}}):
    lib.kernelize(blocks, mode=Mode.TRAINING, device="cpu")
    got = blocks(x)
    got.sum().backward()
    seen["function"] = [runs(axpy) == "Axpy", bool(torch.allclose(got, expected)), sorted(blocks[0].__dict__["_kernel_funcs"]),
                        blocks[1].proj.weight.grad is not None]
    seen["kernelized_funcs"] = None if kernelized is None else sorted(
        [*key, k.repo.layer_name] for key, k in kernelized(blocks).funcs.items())
seen["function_unmapped"] = runs(lib.kernelize(blocks, mode=Mode.INFERENCE, device="cpu")[0].__dict__["_kernel_funcs"]["Axpy"]) == "Axpy"
with lib.use_kernel_mapping({"Axpy": {"cpu": repo("TwoArgs")}}):
    seen["function_no_drop_in"] = error(lambda: lib.kernelize(blocks, mode=Mode.INFERENCE, device="cpu"))
seen["function_misuse"] = [error(lambda: lib.use_kernelized_func(lambda x: x)(Net)),
                           error(lambda: lib.use_kernelized_func(axpy)(Net))]

for layer in ("Stateful", "TwoArgs", "KeywordOnly"):
    with lib.use_kernel_mapping({"RMSNorm": {"cpu": repo(layer)}}):
        seen[f"no_drop_in_{layer}"] = error(lambda: lib.kernelize(Net(), mode=Mode.INFERENCE, device="cpu"))

seen["misuse"] = [
    error(lambda: lib.LayerRepository(REPO, layer_name="RMSNorm")),
    error(lambda: lib.LayerRepository(REPO, layer_name="RMSNorm", version=1, revision="v1")),
    error(lambda: Mode.INFERENCE | Mode.TRAINING),
    error(lambda: Mode.FALLBACK | Mode.TORCH_COMPILE),
    error(lambda: lib.kernelize(Net(), mode=Mode.FALLBACK, device="cpu")),
    error(lambda: lib.kernelize(Net(), mode=Mode.TORCH_COMPILE, device="cpu")),
    error(lambda: lib.Device(type="rocm", properties=lib.CUDAProperties(min_capability=80, max_capability=90))),
]
print(json.dumps(seen, sort_keys=True))
