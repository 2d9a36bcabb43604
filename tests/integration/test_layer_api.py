"""kbuild's layer API in Hugging Face `kernels`' spelling (use_kernel_forward_from_hub,
LayerRepository, Mode, Device, register_kernel_mapping / use_kernel_mapping, kernelize), with the
behaviours `kernels`' own layer tests check: which mapping entry serves which mode, contexts that
stack and unwind, capability ranges, versions, the fallback cases, the drop-in check of a layer,
and one-line errors for misuse. On the CPU, against a kernel published to a local git hub by the
real `kbuild publish`; GPU capabilities are judged through KBUILD_GPU_ARCH, as the loader does."""

from __future__ import annotations

import inspect
import json
import logging
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
from torch import nn

from kbuild import (
    CUDAProperties,
    Device,
    InvalidLayer,
    KernelizedLayers,
    KernelizeFallback,
    LayerRepository,
    LocalLayerRepository,
    LockedLayerRepository,
    Mode,
    RevisionNotFound,
    ROCMProperties,
    get_kernel,
    get_kernelized_layers,
    get_loaded_kernels,
    kernelize,
    register_kernel_mapping,
    replace_kernel_forward_from_hub,
    use_kernel_forward_from_hub,
    use_kernel_mapping,
    use_kernelized_func,
)
from kbuild.errors import InvalidRequest
from kbuild.layers import restore
from kbuild.layers.mapping import current_mapping
from layer_kernel import publish_layer_kernel
from runtime_hubs import runtime_env, torch_probes

__all__ = ["runtime_env", "torch_probes"]  # fixtures, used by name

pytestmark = pytest.mark.usefixtures("runtime_env")


@use_kernel_forward_from_hub("RMSNorm")
class ModelNorm(nn.Module):
    def __init__(self, hidden: int = 16, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.linspace(0.5, 1.5, hidden))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        x = hidden_states.float()
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.variance_epsilon))


@use_kernel_forward_from_hub("Version")
class Version(nn.Module):
    def forward(self) -> int:
        return 0


@use_kernel_forward_from_hub("Axpy")
def axpy(x, y, alpha=1.0):
    """alpha * x + y"""
    return alpha * x + y


@use_kernelized_func(axpy)
class Block(nn.Module):
    """Calls a function layer, as transformers' attention calls apply_rotary_pos_emb."""

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

    def forward(self, x):
        return self.norm(self.proj(x))


@pytest.fixture
def hub(tmp_path) -> str:
    publish_layer_kernel(tmp_path / "rmsnorm", tmp_path / "hub", versions=(1, 2))
    return str(tmp_path / "hub")


@pytest.fixture(autouse=True)
def empty_mapping():
    """Each test starts from no registered mapping, and leaves none behind."""
    register_kernel_mapping({}, inherit_mapping=False)
    yield
    register_kernel_mapping({}, inherit_mapping=False)


def repo(hub: str, layer: str = "RMSNorm", **pin) -> LayerRepository:
    return LayerRepository("org/rmsnorm", layer_name=layer, hub=hub, **(pin or {"version": 1}))


def bound(module) -> str:
    """The class whose forward the module runs now."""
    return module.forward.__func__.__qualname__.split(".")[0]


def test_a_mapped_layer_serves_inference_and_training(hub):
    net, reference = Net(), Net()
    reference.load_state_dict(net.state_dict())
    register_kernel_mapping({"RMSNorm": {"cpu": repo(hub)}})
    kernelize(net, mode=Mode.INFERENCE)
    assert bound(net.norm) == "RMSNorm"
    x = torch.randn(4, 16)
    torch.testing.assert_close(net(x), reference(x), rtol=1e-5, atol=1e-6)
    kernelize(net, mode=Mode.TRAINING, device="cpu")
    net(x).square().sum().backward()
    reference(x).square().sum().backward()
    torch.testing.assert_close(net.norm.weight.grad, reference.norm.weight.grad, rtol=1e-4, atol=1e-6)
    # the class is untouched: a module made afterwards runs its own forward
    assert bound(Net().norm) == "ModelNorm"


def test_a_function_layer_is_kernelized_once_through_the_modules_that_carry_it(hub):

    # the decorated function is a module called as the function was, with its signature after self
    assert isinstance(axpy, nn.Module) and type(axpy).__name__ == "axpy" and axpy.__doc__ == "alpha * x + y"
    assert list(inspect.signature(type(axpy).forward).parameters) == ["self", "x", "y", "alpha"]
    blocks = nn.Sequential(Block(), Block())
    x = torch.randn(4, 16)
    expected = blocks(x)
    assert blocks[0].__dict__["_kernel_funcs"] == {"Axpy": axpy}  # where and how `kernels` keeps them too
    kernelize(blocks, {"Axpy": {"cpu": repo(hub, "Axpy")}}, mode=Mode.TRAINING, device="cpu")
    assert bound(axpy) == "Axpy"
    kernel = next(m for name, m in sys.modules.items() if name.endswith(".layers") and hasattr(m, "CALLS"))
    before = kernel.CALLS["Axpy"]
    got = blocks(x)
    torch.testing.assert_close(got, expected)
    assert kernel.CALLS["Axpy"] == before + 2  # both blocks call the one kernelized function
    got.sum().backward()
    assert blocks[0].proj.weight.grad is not None
    restore(blocks)
    assert bound(axpy) == "axpy"
    kernel.CALLS["Axpy"] = 0
    blocks(x)
    assert kernel.CALLS["Axpy"] == 0
    # a layer whose forward does not take the function's arguments is refused, naming the function
    with pytest.raises(InvalidLayer, match=r"forward takes 2 arguments and axpy.forward 4"):
        kernelize(blocks, {"Axpy": {"cpu": repo(hub, "RMSNorm")}}, device="cpu")


def test_each_mode_takes_its_closest_registration(hub):
    """As `kernels` orders them: the same mode first; a training kernel serves inference (not the
    other way round); a torch.compile kernel serves eager runs; FALLBACK last."""
    net = Net()
    modes = {Mode.INFERENCE: repo(hub, "NormNoBackward"), Mode.TRAINING: repo(hub, "RMSNorm")}
    with use_kernel_mapping({"RMSNorm": {"cpu": modes}}):
        assert bound(kernelize(net, mode=Mode.INFERENCE).norm) == "NormNoBackward"
        assert bound(kernelize(net, mode=Mode.TRAINING).norm) == "RMSNorm"
        # torch.compile wanted, and only eager registrations: none serves, the own forward is back
        with pytest.warns(UserWarning, match="no entry of its mapping serves Mode.INFERENCE|TORCH_COMPILE"):
            assert bound(kernelize(net, mode=Mode.INFERENCE | Mode.TORCH_COMPILE).norm) == "ModelNorm"
    with use_kernel_mapping({"RMSNorm": {"cpu": {Mode.TRAINING | Mode.TORCH_COMPILE: repo(hub)}}}):
        for mode in (Mode.INFERENCE, Mode.TRAINING, Mode.INFERENCE | Mode.TORCH_COMPILE,
                     Mode.TRAINING | Mode.TORCH_COMPILE):
            assert bound(kernelize(net, mode=mode).norm) == "RMSNorm", mode
    with use_kernel_mapping({"RMSNorm": {"cpu": {Mode.FALLBACK: repo(hub, "NormNoBackward"),
                                                 Mode.INFERENCE: repo(hub)}}}):
        assert bound(kernelize(net, mode=Mode.INFERENCE).norm) == "RMSNorm"
        # training falls to FALLBACK, whose layer has no backward: the own forward
        with pytest.warns(UserWarning, match="NormNoBackward does not support mode Mode.TRAINING"):
            assert bound(kernelize(net, mode=Mode.TRAINING).norm) == "ModelNorm"
        with pytest.raises(ValueError, match="use_fallback does not allow NO_COMPATIBLE_MODE"):
            kernelize(net, mode=Mode.TRAINING, use_fallback=False)


def test_a_registration_the_layer_cannot_honour_is_an_error_whatever_the_fallback(hub):
    with use_kernel_mapping({"RMSNorm": {"cpu": {Mode.TRAINING: repo(hub, "NormNoBackward")}}}):
        with pytest.raises(ValueError, match=r"org/rmsnorm@v1:NormNoBackward does not support backward .*"
                                             r"mapped for RMSNorm in Mode.TRAINING"):
            kernelize(Net(), mode=Mode.TRAINING)
    with use_kernel_mapping({"RMSNorm": {"cpu": {Mode.INFERENCE | Mode.TORCH_COMPILE: repo(hub, "NormNoBackward")}}}):
        with pytest.raises(ValueError, match="does not support torch.compile"):
            kernelize(Net(), mode=Mode.INFERENCE | Mode.TORCH_COMPILE)


def test_mapping_contexts_stack_and_unwind(hub):
    register_kernel_mapping({"RMSNorm": {"cpu": repo(hub)}, "Other": {"cuda": repo(hub)}})
    assert set(current_mapping()) == {"RMSNorm", "Other"}
    with use_kernel_mapping({"Version": {"cpu": repo(hub, "Version")}}):
        assert set(current_mapping()) == {"RMSNorm", "Other", "Version"}
        with use_kernel_mapping({"RMSNorm": {"cpu": repo(hub, "NormNoBackward")}}):
            assert bound(kernelize(Net()).norm) == "NormNoBackward"
        assert bound(kernelize(Net()).norm) == "RMSNorm"
        with use_kernel_mapping({"Version": {"cpu": repo(hub, "Version", version=2)}}, inherit_mapping=False):
            assert set(current_mapping()) == {"Version"}
            assert kernelize(Version(), device="cpu")() == 2
        assert set(current_mapping()) == {"RMSNorm", "Other", "Version"}
    assert set(current_mapping()) == {"RMSNorm", "Other"}
    with pytest.raises(RuntimeError):
        with use_kernel_mapping({"Version": {"cpu": repo(hub, "Version")}}):
            raise RuntimeError("the block fails")
    assert set(current_mapping()) == {"RMSNorm", "Other"}  # unwound all the same


def test_versions_and_revisions_pin_the_layer(hub):
    version = Version()
    for pin, expected in (({"version": 1}, 1), ({"version": 2}, 2), ({"revision": "v1"}, 1)):
        with use_kernel_mapping({"Version": {"cpu": repo(hub, "Version", **pin)}}):
            assert kernelize(version, device="cpu")() == expected, pin
    with use_kernel_mapping({"Version": {"cpu": LayerRepository("org/rmsnorm@v2", layer_name="Version", hub=hub)}}):
        assert kernelize(version, device="cpu")() == 2
    with use_kernel_mapping({"Version": {"cpu": repo(hub, "Version", version=7)}}):
        with pytest.raises(RevisionNotFound, match="has no version 7 .*available versions: v1, v2"):
            kernelize(version, device="cpu")


def test_gpu_capability_ranges_pick_the_narrowest_entry(hub, monkeypatch):
    """Judged for a GPU named by KBUILD_GPU_ARCH (this machine has none); the pure-Python kernel's
    torch-cuda variant loads."""
    if not torch.version.cuda:
        pytest.skip("needs a CUDA build of torch")
    mapping = {"RMSNorm": {
        "cuda": repo(hub, "NormNoBackward"),
        Device("cuda", CUDAProperties(min_capability=80, max_capability=100)): repo(hub, "RMSNorm"),
        Device("cuda", CUDAProperties(min_capability=90, max_capability=90)): repo(hub, "RMSNorm", revision="v2"),
    }}
    with use_kernel_mapping(mapping):
        for arch, expected in (("9.0", "RMSNorm@v2"), ("8.6", "RMSNorm@v1"), ("7.5", "NormNoBackward@v1")):
            monkeypatch.setenv("KBUILD_GPU_ARCH", arch)
            net = kernelize(Net(), device="cuda")
            module = net.norm.forward.__func__.__module__
            where = json.loads((Path(__import__(module).__file__).parent / "metadata.json").read_text())
            assert f"{bound(net.norm)}@v{where['version']}" == expected, arch
    with use_kernel_mapping({"RMSNorm": {Device("cuda", CUDAProperties(80, 89)): repo(hub)}}, inherit_mapping=False):
        monkeypatch.setenv("KBUILD_GPU_ARCH", "9.0")
        with pytest.warns(UserWarning, match=r"no cuda entry of its mapping covers this GPU \(capability 90\)"):
            assert bound(kernelize(Net(), device="cuda").norm) == "ModelNorm"


def test_fallback_cases(hub, caplog):
    net = Net()
    # no mapping for the name: logged, and the own forward (as kernels does), unless use_fallback=False
    with caplog.at_level(logging.WARNING, logger="kbuild.layers"):
        kernelize(net, mode=Mode.INFERENCE)
    assert "RMSNorm keeps its own forward: no kernel mapping has this layer name" in caplog.text
    with pytest.raises(ValueError, match="RMSNorm: no kernel mapping has this layer name .*NO_LAYER"):
        kernelize(net, use_fallback=False)
    # a mapping for another device type
    with use_kernel_mapping({"RMSNorm": {"cuda": repo(hub)}}):
        with pytest.warns(UserWarning, match=r"its mapping has no entry for cpu \(it has cuda\)"):
            assert bound(kernelize(net).norm) == "ModelNorm"
        with pytest.raises(ValueError, match="NO_DEVICE"):
            kernelize(net, use_fallback=KernelizeFallback.ALL & ~KernelizeFallback.NO_DEVICE)
    # a kernel that is not on the hub: raised by default (the loader's own error), kept with ALL
    with use_kernel_mapping({"RMSNorm": {"cpu": LayerRepository("org/absent", layer_name="RMSNorm", version=1,
                                                                hub=hub)}}):
        with pytest.raises(FileNotFoundError, match="org/absent"):
            kernelize(net)
        with pytest.warns(UserWarning, match="RMSNorm keeps its own forward: .*org/absent"):
            kernelize(net, use_fallback=KernelizeFallback.ALL)


def test_a_kernelized_module_gets_its_own_forward_back_when_a_later_call_falls_back(hub):
    net = Net()
    with use_kernel_mapping({"RMSNorm": {"cpu": {Mode.INFERENCE: repo(hub)}}}):
        assert bound(kernelize(net, mode=Mode.INFERENCE).norm) == "RMSNorm"
        with pytest.warns(UserWarning):
            assert bound(kernelize(net, mode=Mode.TRAINING).norm) == "ModelNorm"


def test_conditions_and_the_off_switch(hub, monkeypatch):
    class Wide(nn.Module):
        def __init__(self):
            super().__init__()
            self.small, self.large = ModelNorm(8), ModelNorm(32)

    replace_kernel_forward_from_hub(ModelNorm, "RMSNorm", condition=lambda m: m.weight.numel() > 16)
    try:
        with use_kernel_mapping({"RMSNorm": {"cpu": repo(hub)}}):
            wide = kernelize(Wide(), device="cpu")
            assert (bound(wide.small), bound(wide.large)) == ("ModelNorm", "RMSNorm")
            monkeypatch.setenv("DISABLE_KERNEL_MAPPING", "1")
            assert bound(kernelize(Wide(), device="cpu").large) == "ModelNorm"
    finally:
        replace_kernel_forward_from_hub(ModelNorm, "RMSNorm")


def test_local_and_locked_repositories(hub, tmp_path):
    kernel_root = tmp_path / "rmsnorm"  # built by the hub fixture: build/torch-cpu holds v2
    with use_kernel_mapping({"Version": {"cpu": LocalLayerRepository(kernel_root, layer_name="Version")}}):
        assert kernelize(Version(), device="cpu")() == 2
    from kbuild.lockfile import lock_kernel, write_lock

    lockfile = tmp_path / "kernels.lock"
    write_lock(lockfile, [lock_kernel("org/rmsnorm@v1", hub=hub)])
    locked = LockedLayerRepository("org/rmsnorm", layer_name="Version", lockfile=lockfile)
    with use_kernel_mapping({"Version": {"cpu": locked}}):
        assert kernelize(Version(), device="cpu")() == 1
    with pytest.raises(FileNotFoundError, match="no kernels.lock in"):
        LockedLayerRepository("org/rmsnorm", layer_name="Version")  # none above this test file


@pytest.mark.parametrize("layer, message", [
    ("Stateful", "must not override nn.Module's constructor"),
    ("TwoArgs", r"forward takes 3 arguments and ModelNorm.forward 2"),
    ("KeywordOnly", "forward's argument 'hidden_states' is keyword-only where ModelNorm.forward's "
                    "'hidden_states' is positional or keyword"),
])
def test_a_layer_that_is_no_drop_in_is_refused(hub, layer, message):
    with use_kernel_mapping({"RMSNorm": {"cpu": repo(hub, layer)}}):
        with pytest.raises(InvalidLayer, match=message):
            kernelize(Net(), use_fallback=KernelizeFallback.ALL)  # never a fallback case
    assert issubclass(InvalidLayer, TypeError)  # what kernels raises there


def test_misuse_is_a_one_line_error():
    cases = [
        (lambda: LayerRepository("org/x", layer_name="L"), "Either a revision or a version must be specified"),
        (lambda: LayerRepository("org/x", layer_name="L", version=1, revision="main"), "not both"),
        (lambda: LayerRepository("org/x@v1", layer_name="L", version=1), "not both"),
        (lambda: LayerRepository("org/x", layer_name="not a name", version=1), "layer_name must be a class name"),
        (lambda: Mode.INFERENCE | Mode.TRAINING, "mutually exclusive"),
        (lambda: Mode.FALLBACK | Mode.TORCH_COMPILE, "cannot be combined"),
        (lambda: kernelize(Net(), mode=Mode.FALLBACK), "can only be used to register kernel mappings"),
        (lambda: kernelize(Net(), mode=Mode.TORCH_COMPILE), "mode must contain Mode.INFERENCE or Mode.TRAINING"),
        (lambda: kernelize(Net(), use_fallback="yes"), "use_fallback must be True, False or KernelizeFallback"),
        (lambda: kernelize(Net(), device="gpu"), r"unknown device type 'gpu' \(known: cpu, cuda"),
        (lambda: kernelize(nn.ReLU()), "the model has no parameters or buffers .*pass device="),
        (lambda: Device("rocm", CUDAProperties(80, 90)), "CUDAProperties is only for 'cuda' devices"),
        (lambda: Device("cuda", ROCMProperties(80, 90)), "ROCMProperties is only for 'rocm' devices"),
        (lambda: CUDAProperties(min_capability=90, max_capability=80), r"min_capability \(90\) must be <="),
        (lambda: CUDAProperties(min_capability=9.0, max_capability=90), "must be a whole number such as 90"),
        (lambda: register_kernel_mapping({"RMSNorm": LayerRepository("org/x", layer_name="L", version=1)}),
         "expected a dict of device -> repository"),
        (lambda: register_kernel_mapping({"RMSNorm": {"cuda": "org/x@v1:L"}}), "expected a LayerRepository"),
        (lambda: register_kernel_mapping({"RMSNorm": {"cuda": {"training": LayerRepository("org/x", layer_name="L",
                                                                                           version=1)}}}),
         "modes must be Mode values"),
        (lambda: use_kernel_forward_from_hub("RMSNorm")(42), "decorates an nn.Module class or a function, not 42"),
        (lambda: use_kernelized_func(lambda x: x)(Net), "on Net: '<lambda>' is not marked with @use_kernel_forward_from_hub"),
        (lambda: use_kernelized_func(axpy)(axpy), "decorates an nn.Module class"),
        (lambda: use_kernel_forward_from_hub(""), "the layer name must be a non-empty string"),
    ]
    for call, message in cases:
        with pytest.raises(ValueError, match=message) as caught:
            call()
        assert "\n" not in str(caught.value), str(caught.value)
    assert current_mapping() == {}  # a bad mapping registers nothing


def test_get_kernelized_layers_names_each_bound_layer_and_its_repository(hub):
    """kernels 0.18's get_kernelized_layers: the module name (as named_modules gives it) or the
    (carrier, function) of each layer a kernel serves, with the repository it came from."""
    model = nn.Sequential(Net(), Block())
    norm, function = repo(hub), repo(hub, "Axpy")
    assert get_kernelized_layers(model) == KernelizedLayers()
    try:
        kernelize(model, {"RMSNorm": {"cpu": norm}, "Axpy": {"cpu": function}}, device="cpu")
        found = get_kernelized_layers(model)
        assert {name: k.repo for name, k in found.layers.items()} == {"0.norm": norm}
        assert found.layers["0.norm"].module is model[0].norm
        assert {key: k.repo for key, k in found.funcs.items()} == {("1", "Axpy"): function}
        assert found.funcs[("1", "Axpy")].module is axpy
        # a later kernelize that falls back takes the layer off the list
        kernelize(model, {"Axpy": {"cpu": function}}, device="cpu")
        assert list(get_kernelized_layers(model).layers) == []
    finally:
        restore(model)
    assert get_kernelized_layers(model) == KernelizedLayers()


def test_check_arch_is_part_of_each_repository(hub, tmp_path):
    """kernels 0.19's check_arch= on the repository classes: passed to the loader, part of equality."""
    relaxed = repo(hub, version=1, check_arch=False)
    assert relaxed != repo(hub) and relaxed == repo(hub, version=1, check_arch=False) and hash(relaxed) == hash(
        repo(hub, version=1, check_arch=False))
    net, reference = Net(), Net()
    reference.load_state_dict(net.state_dict())
    kernelize(net, {"RMSNorm": {"cpu": relaxed}}, device="cpu")
    assert bound(net.norm) == "RMSNorm"
    local = LocalLayerRepository(tmp_path / "rmsnorm", layer_name="Version", check_arch=False)
    assert local != LocalLayerRepository(tmp_path / "rmsnorm", layer_name="Version")
    with use_kernel_mapping({"Version": {"cpu": local}}):
        assert kernelize(Version(), device="cpu")() == 2
    with pytest.raises(InvalidRequest, match=r"check_arch must be True or False, got 'no'"):
        LayerRepository("org/rmsnorm", layer_name="RMSNorm", version=1, check_arch="no")


def test_get_loaded_kernels_lists_what_was_imported_and_from_where(hub):
    kernel = get_kernel("org/rmsnorm@v1", hub=hub, backend="cpu")
    (loaded,) = [k for k in get_loaded_kernels() if k.module is kernel]
    assert loaded.repo_id == "org/rmsnorm" and len(loaded.revision) == 40
    assert loaded.metadata.name == "tiny" and loaded.metadata.id == kernel.__name__
    assert loaded.path.name == "torch-cpu"
    get_loaded_kernels().clear()  # a copy: the registry keeps it
    assert any(k.module is kernel for k in get_loaded_kernels())
