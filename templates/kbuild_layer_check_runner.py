"""Runs `kbuild check-layers` for one variant, inside the Python that loads it and runs transformers
(`kbuild check-layers` starts it with the variant on the path under the kernel's Python name; it
imports nothing of kbuild, which that Python may not have). Reads a JSON spec, writes one JSON report.

What it does (docs/checking-layers.md): a tiny random transformers model, built twice with the same
weights; into one it binds the kernel's layers as Hugging Face's `kernelize` binds them (a class layer's
forward onto every module whose class is marked with the layer's name, a function layer in place of the
function marked with it), runs forward (and backward) on both and compares logits, loss and every
parameter's gradient; then replays each bound layer's captured inputs in isolation against the original
code: output, every input's gradient, every parameter's gradient. Where a gradient differs, a second pass
with torch's autograd fallback set to "error" names the custom op autograd cannot see, and
`torch.library.opcheck` runs on each custom op the layer called, with the inputs it was called with.
"""

from __future__ import annotations

import argparse
import copy
import functools
import importlib
import inspect
import json
import math
import sys
import traceback
import types
import warnings
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where it runs (inside the functions), as transformers is
    import torch

# dtype -> relative error allowed (a layer alone, the whole model): the spec's, set by kbuild (layer_check.py)
TOLERANCE: dict[str, tuple[float, float]] = {}
TINY = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, head_dim=16, vocab_size=256, max_position_embeddings=128)
IDS_SHAPE = (2, 16)
OPCHECK_TESTS = ("test_schema", "test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic")
MODEL_ROWS = 6  # parameters whose gradients differ, named one by one; the rest counted
REPLAYS = 4  # captured calls replayed per layer: enough to see every shape a tiny model passes


class BadInput(Exception):
    """A spec this model or kernel cannot check: exit 2, one line."""


class Absent(BadInput):
    """A layer the model has no module or function for."""


class Unavailable(Exception):
    """This Python cannot run the check at all (no transformers)."""


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--spec", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    spec = json.loads(args.spec.read_text())
    try:
        report = check(spec)
    except BadInput as e:
        report = {"bad_input": str(e)}
    except Unavailable as e:
        report = {"unavailable": str(e)}
    args.out.write_text(json.dumps(report, indent=1))
    return 0


# -- the two models, the kernel's layers bound into one ------------------------------------------------------

def check(spec: dict) -> dict:
    import torch
    try:
        import transformers
    except ImportError as e:
        raise Unavailable(f"{sys.executable} cannot import transformers ({e}): pip install transformers "
                          "there") from None

    TOLERANCE.update({d: tuple(t) for d, t in spec["tolerance"].items()})
    kernel = importlib.import_module(spec["kernel"])
    layers_module: types.ModuleType | None
    try:
        layers_module = importlib.import_module(f"{spec['kernel']}.layers")
    except ModuleNotFoundError:
        layers_module = getattr(kernel, "layers", None)
    device = spec["device"]
    report = {"torch": torch.__version__, "transformers": transformers.__version__, "device": device,
              "gpu": torch.cuda.get_device_name() if device == "cuda" else None, "model": spec["model"],
              "tolerance": {d: {"layer": TOLERANCE[d][0], "model": TOLERANCE[d][1]} for d in spec["dtypes"]},
              "layers": [], "rows": [], "notes": []}
    reference = build_model(spec["model"], device)
    bindings = []
    for entry in spec["maps"]:
        try:
            bindings.append(find_binding(entry, layers_module, reference, spec["model"]))
        except Absent as e:  # transformers maps it, this model has none: said, not checked
            report["notes"].append(f"{entry['layer']} ({entry['kernel_layer']}): not checked: {e}")
    if not bindings:
        raise BadInput("no layer to check: " + "; ".join(report["notes"]))
    for binding in bindings:
        report["layers"].append(binding.describe())
    for dtype_name in spec["dtypes"]:
        dtype = getattr(torch, dtype_name)
        for mode in spec["modes"]:
            check_model(reference, bindings, dtype, dtype_name, mode, device, report)
    return report


def build_model(arch: str, device: str):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    try:
        config = AutoConfig.for_model(arch, **TINY)
    except ValueError as e:
        first = str(e).splitlines()[0][:120]
        raise BadInput(f"--model {arch}: transformers has no such model type ({first})") from None
    config._attn_implementation = "eager"  # the same attention in both, whatever is installed
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config).to(device)
    with torch.no_grad():  # norms start at 1: spread them so a weight's gradient tells scale from shift
        for name, param in model.named_parameters():
            if name.endswith("norm.weight"):
                param.uniform_(0.5, 1.5)
    return model


class Binding:
    """One kernel layer and what it replaces in the model: a class layer's forward on each module whose
    class carries `kernel_layer_name == layer`, or a function layer in place of the marked function."""

    def __init__(self, layer: str, kernel_layer: str, layer_cls, modes: list[str], how: str, targets):
        self.layer, self.kernel_layer, self.layer_cls, self.modes, self.how = layer, kernel_layer, layer_cls, modes, how
        self.targets = targets  # "class": module classes; "function": (module, attribute name, original)
        self.has_backward = getattr(layer_cls, "has_backward", True)
        self.calls: list = []  # captured (module or None, args, kwargs) of the kernel run

    @property
    def kind(self) -> str:
        return "function" if self.how.startswith("function") else "class"

    def describe(self) -> dict:
        where = sorted({t.__name__ for t in self.targets} if self.kind == "class"
                       else {f"{m.__name__}.{a}" for m, a, _ in self.targets})
        return {"layer": self.layer, "kernel_layer": self.kernel_layer, "kind": self.kind, "matched": self.how,
                "replaces": where, "has_backward": self.has_backward, "modes": self.modes}


def find_binding(entry: dict, layers_module, model, arch: str) -> Binding:
    layer, kernel_layer = entry["layer"], entry["kernel_layer"]
    layer_cls = getattr(layers_module, kernel_layer, None) if layers_module is not None else None
    if layer_cls is None or not isinstance(layer_cls, type):
        have = sorted(n for n, v in vars(layers_module).items() if isinstance(v, type)
                      and hasattr(v, "forward") and not n.startswith("_")) if layers_module is not None else []
        raise BadInput(f"{layer}={kernel_layer}: the kernel has no layer {kernel_layer!r} "
                       f"(its layers: {', '.join(have) or 'none'})")
    marked = [type(m) for m in model.modules() if getattr(type(m), "kernel_layer_name", None) == layer]
    functions = _marked_functions(model, layer)
    # transformers marks its layers only when Hugging Face's `kernels` is installed: by class name then
    named = [type(m) for m in model.modules() if type(m).__name__.endswith(layer) and type(m).__name__ != "Module"]
    for how, targets in (("class marked by transformers", marked), ("function marked by transformers", functions),
                         ("class by name", named)):
        if targets:
            binding = Binding(layer, kernel_layer, layer_cls, entry["modes"], how, _unique(targets))
            _check_drop_in(binding, targets[0])
            return binding
    import transformers
    hint = ("" if _kernels_marks() else "; transformers marks its layers and functions only when Hugging Face's "
            "`kernels` is installed (pip install kernels)")
    error = Absent if not entry.get("required", True) else BadInput
    raise error(f"{layer}={kernel_layer}: no module or function of a tiny {arch} model (transformers "
                f"{transformers.__version__}) is marked {layer!r}{hint}; pass --model with one that has it")


def _check_drop_in(b: Binding, target: type[torch.nn.Module] | tuple) -> None:
    """The kernel layer's forward takes what the original takes (as kernelize's drop-in check asks)."""
    original = target.forward if isinstance(target, type) else getattr(target[2], "forward", target[2])

    def shape(function, drop_self: bool):
        params = list(inspect.signature(function).parameters.values())[1 if drop_self else 0:]
        return [p.kind for p in params], [p.name for p in params]

    ours, theirs = shape(b.layer_cls.forward, True), shape(original, isinstance(target, type))
    if ours[0] != theirs[0]:
        raise BadInput(f"{b.layer}={b.kernel_layer}: layers.{b.kernel_layer}.forward({', '.join(ours[1])}) takes other "
                       f"arguments than the {b.layer} it would replace ({', '.join(theirs[1])}): not a drop-in")


def _kernels_marks() -> bool:
    try:
        import kernels  # noqa: F401
    except ImportError:
        return False
    return True


def _unique(items: Iterable) -> list:
    return list(dict.fromkeys(items))


def _marked_functions(model, layer: str) -> list:
    """(module, attribute, object) for each module-level object of the model's code marked `layer`
    (transformers' function layers: `@use_kernel_forward_from_hub("rotary_pos_emb")` on a function)."""
    found = []
    for module_name in _unique(type(m).__module__ for m in model.modules()):
        module = sys.modules.get(module_name)
        for attr, value in vars(module or types.SimpleNamespace()).items():
            if not isinstance(value, type) and getattr(value, "kernel_layer_name", None) == layer:
                found.append((module, attr, value))
    return found


@contextmanager
def bound(model, bindings: list[Binding], capture: bool):
    """`model` with the kernel's layers in place of the originals for the block (function layers are
    module-level, so they are swapped for the block only); with `capture`, each call's inputs kept."""
    undo: list[Callable[[], object]] = []
    for b in bindings:
        if b.kind == "class":
            for module in model.modules():
                if type(module) in b.targets:
                    module.forward = types.MethodType(b.layer_cls.forward, module)
                    undo.append(functools.partial(module.__dict__.pop, "forward", None))
                    if capture:
                        hook = module.register_forward_pre_hook(_recorder(b, module), with_kwargs=True)
                        undo.append(hook.remove)
        else:
            instance = b.layer_cls()
            for owner, attr, original in b.targets:
                setattr(owner, attr, _function(instance, b if capture else None))
                undo.append(functools.partial(setattr, owner, attr, original))
    try:
        yield
    finally:
        for step in reversed(undo):
            step()


def _recorder(binding: Binding, module):
    def hook(_module, args, kwargs):
        binding.calls.append((module, _detached(args), _detached(kwargs)))
    return hook


def _function(instance, binding: Binding | None):
    def call(*args, **kwargs):
        if binding is not None:
            binding.calls.append((None, _detached(args), _detached(kwargs)))
        return instance.forward(*args, **kwargs)
    return call


def _detached(value):
    """Copies of the tensors in `value`, out of autograd; a floating one keeps whether it required grad
    (the replay differentiates with respect to just those: what the model differentiated)."""
    import torch
    from torch.utils._pytree import tree_map

    def copy_(t):
        return t.detach().clone().requires_grad_(t.requires_grad and t.is_floating_point())
    return tree_map(lambda t: copy_(t) if isinstance(t, torch.Tensor) else t, value)


# -- comparing: the whole model, then each layer alone --------------------------------------------------------

def check_model(reference, bindings: list[Binding], dtype, dtype_name: str, mode: str, device: str, report: dict):
    import torch

    training = mode == "training"
    active = [b for b in bindings if not training or (b.has_backward and "training" in b.modes)]
    for b in bindings:
        if b not in active:
            why = ("its has_backward is False" if not b.has_backward
                   else "the mapping binds it for inference only")
            report["notes"].append(f"{b.layer} ({b.kernel_layer}): checked for inference only: {why}")
    if not active:
        return
    base = copy.deepcopy(reference).to(dtype)
    kernelized = copy.deepcopy(base)
    ids = torch.randint(0, TINY["vocab_size"], IDS_SHAPE, generator=torch.Generator().manual_seed(1)).to(device)
    for b in active:
        b.calls = []
    tol = TOLERANCE[dtype_name][1]
    ref_out, ref_grads = _run(base, ids, training)
    row = _row_for(report, "model", "-", dtype_name, mode)
    try:
        with bound(kernelized, active, capture=True), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out, grads = _run(kernelized, ids, training)
    except Exception as e:  # the kernel's layers could not run here (an op without a kernel for this device, say)
        row("backward" if training and _after_forward(e) else "forward",
            f"the kernelized model raised {_first_line(e)}", math.nan, TOLERANCE[dtype_name][1], why="raised")
        return
    row("forward", "logits", _rel(out["logits"], ref_out["logits"]), tol)
    row("forward", "loss", _rel(out["loss"], ref_out["loss"]), tol)
    if training:
        worst = sorted(((_rel(grads.get(n), g), n) for n, g in ref_grads.items()), key=lambda x: -_nan_high(x[0]))
        report.setdefault("parameter_grads", {})[f"{dtype_name}/{mode}"] = {n: r for r, n in worst}
        over = [(r, n) for r, n in worst if not r <= tol]
        if not over:
            row("backward", f"grads of all {len(worst)} parameters (worst: {worst[0][1]})", worst[0][0], tol)
        for r, n in over[:MODEL_ROWS]:
            row("backward", f"grad of {n}", r, tol)
        if len(over) > MODEL_ROWS:
            row("backward", f"grads of {len(over) - MODEL_ROWS} more of the {len(worst)} parameters",
                over[MODEL_ROWS][0], tol)
    warned = sorted({str(w.message).splitlines()[0] for w in caught if "autograd" in str(w.message)})
    for b in active:
        check_layer(b, dtype_name, mode, device, report, warned)


def _after_forward(e: BaseException) -> bool:
    """Whether `e` came from backward (autograd's engine), not from the forward."""
    return any(frame.name in ("backward", "_engine_run_backward") for frame in traceback.extract_tb(e.__traceback__))


def _run(model, ids, training: bool) -> tuple[dict, dict]:
    import torch

    if not training:
        model.eval()
        with torch.no_grad():
            out = model(input_ids=ids, labels=ids)
        return {"logits": out.logits, "loss": out.loss}, {}
    model.train()
    model.zero_grad(set_to_none=True)
    out = model(input_ids=ids, labels=ids)
    out.loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}
    return {"logits": out.logits.detach(), "loss": out.loss.detach()}, grads


def check_layer(b: Binding, dtype_name: str, mode: str, device: str, report: dict, warned: list[str]):
    """Each captured call of `b`, replayed alone: the kernel's layer against the original code."""
    training = mode == "training"
    tol = TOLERANCE[dtype_name][0]
    row = _row_for(report, b.layer, b.kernel_layer, dtype_name, mode)
    if not b.calls:
        report["notes"].append(f"{b.layer} ({b.kernel_layer}): never called by the model's forward")
        return
    worst: dict[tuple[str, str], float] = {}
    for module, args, kwargs in _spread(b.calls):
        for (part, quantity), rel in replay(b, module, args, kwargs, training).items():
            worst[part, quantity] = max(worst.get((part, quantity), 0.0), rel, key=_nan_high)
    for (part, quantity), rel in worst.items():
        row(part, quantity, rel, tol)
    failed_backward = training and any(part == "backward" and not rel <= tol for (part, _), rel in worst.items())
    if training:  # what autograd and opcheck say of the layer's custom ops: failing or not, under compile too
        module, args, kwargs = _spread(b.calls)[0]
        report.setdefault("diagnosis", {})[f"{b.layer}/{dtype_name}/{mode}"] = diagnose(
            b, module, args, kwargs, device, warned if failed_backward else [])


def _spread(calls: list) -> list:
    """Up to REPLAYS of the captured calls, first and last among them."""
    if len(calls) <= REPLAYS:
        return calls
    step = (len(calls) - 1) / (REPLAYS - 1)
    return [calls[round(i * step)] for i in range(REPLAYS)]


def _nan_high(value: float) -> float:
    return math.inf if value != value else value


def replay(b: Binding, module, args, kwargs, training: bool) -> dict:
    original = _original(b, module)
    kernel = (types.MethodType(b.layer_cls.forward, module) if b.kind == "class" else b.layer_cls().forward)
    names = _argument_names(original, args, kwargs)
    ref = _call(original, args, kwargs, training, module)
    got = _call(kernel, args, kwargs, training, module)
    found = {}
    outputs = _tensors(ref["out"])
    for i, (r, g) in enumerate(zip(outputs, _tensors(got["out"]))):
        found["forward", "output" if len(outputs) == 1 else f"output {i}"] = _rel(g, r)
    if len(_tensors(got["out"])) != len(outputs):
        found["forward", f"outputs ({len(_tensors(got['out']))} tensors, the original gives {len(outputs)})"] = math.inf
    if training:
        for key, r in ref["grads"].items():
            label = f"grad of {names.get(key, key)}" if not key.startswith("param:") else f"grad of {key[6:]}"
            g = got["grads"].get(key)
            if r is None and g is None:
                continue
            found["backward", label] = _rel(g, r)
    return found


def _original(b: Binding, module):
    if b.kind == "class":
        return types.MethodType(type(module).forward, module)
    _, _, original = b.targets[0]
    return original


def _argument_names(function, args, kwargs) -> dict:
    """"arg:0" -> "q": the original's parameter names for the positions, where its signature says."""
    function = getattr(function, "forward", function)  # a function layer object: its forward's names
    try:
        parameters = list(inspect.signature(function).parameters)
    except (TypeError, ValueError):
        parameters = []
    names = {f"arg:{i}": parameters[i] for i in range(min(len(args), len(parameters)))}
    names.update({f"kwarg:{k}": k for k in kwargs})
    return names


def _call(function, args, kwargs, training: bool, module) -> dict:
    """`function` on fresh copies of the inputs (those that required grad in the model requiring it in
    training); its output and the gradient of a fixed random projection of it with respect to each of
    them and each parameter."""
    import torch

    inputs = {}

    def fresh(key, value):
        if not isinstance(value, torch.Tensor):
            return value
        copy_ = value.detach().clone()
        if training and value.requires_grad:
            copy_.requires_grad_(True)
            inputs[key] = copy_
        return copy_

    call_args = [fresh(f"arg:{i}", a) for i, a in enumerate(args)]
    call_kwargs = {k: fresh(f"kwarg:{k}", v) for k, v in kwargs.items()}
    if not training:
        with torch.no_grad():
            return {"out": function(*call_args, **call_kwargs), "grads": {}}
    params = dict(module.named_parameters()) if module is not None else {}
    out = function(*call_args, **call_kwargs)
    outs = [t for t in _tensors(out) if t.requires_grad]
    sources = {**inputs, **{f"param:{n}": p for n, p in params.items()}}
    if not outs:
        return {"out": out, "grads": {k: None for k in sources}}
    gen = torch.Generator(device=outs[0].device).manual_seed(2)
    upstream = [torch.randn(t.shape, generator=gen, device=t.device, dtype=t.dtype) for t in outs]
    grads = torch.autograd.grad(outs, list(sources.values()), upstream, allow_unused=True)
    return {"out": _detached(out), "grads": dict(zip(sources, (g if g is None else g.detach() for g in grads)))}


def _tensors(value) -> list:
    import torch
    from torch.utils._pytree import tree_leaves

    return [t for t in tree_leaves(value) if isinstance(t, torch.Tensor)]


def _rel(got, ref) -> float:
    """||got - ref|| / ||ref||; infinite where one side has no tensor or another shape (_why says which)."""
    if got is None or ref is None:
        return math.inf
    got, ref = got.detach().double(), ref.detach().double()
    if got.shape != ref.shape:
        return math.inf
    return ((got - ref).norm() / ref.norm().clamp_min(1e-30)).item() if ref.norm() > 0 else (got.norm()).item()


def _row_for(report: dict, layer: str, kernel_layer: str, dtype_name: str, mode: str):
    def row(part: str, quantity: str, rel: float, tol: float, why: str | None = None):
        finite = math.isfinite(rel) and why is None
        report["rows"].append({"layer": layer, "kernel_layer": kernel_layer, "dtype": dtype_name, "mode": mode,
                               "part": part, "quantity": quantity, "rel": rel if finite else None,
                               # no figure: NaN in the kernel's tensor, a tensor one side lacks (or shapes differ), or
                               # the kernel raised
                               "why": why or (None if finite else ("NaN" if rel != rel else "missing")),
                               "tolerance": tol, "ok": finite and rel <= tol})
    return row


# -- why a gradient differs ------------------------------------------------------------------------------------

def diagnose(b: Binding, module, args, kwargs, device: str, warned: list[str]) -> dict:
    """The custom ops the layer called (recorded below autograd), what autograd has for each (a formula, a
    composite it traces through, or nothing: then what it does instead), and opcheck's four tests on each."""
    kernel = (types.MethodType(b.layer_cls.forward, module) if b.kind == "class" else b.layer_cls().forward)
    calls = _custom_op_calls(kernel, args, kwargs, module)
    out: dict = {"custom_ops": sorted({str(op) for op, _, _ in calls})}
    if warned:
        out["autograd_warnings"] = warned
    out["autograd"] = {str(op): _autograd_view(op, device) for op, _, _ in _first_per_op(calls)}
    out["opcheck"] = {str(op): _opcheck(op, a, k) for op, a, k in _first_per_op(calls)}
    return out


def _autograd_view(op, device: str) -> str:
    """What autograd does with `op` on `device`, read from the dispatcher's registrations."""
    import torch

    name = op.name()
    has = functools.partial(torch._C._dispatch_has_kernel_for_dispatch_key, name)
    if has("Autograd") or has("Autograd" + device.upper()):
        return "has an autograd formula"
    if has("CompositeImplicitAutograd"):
        return "no formula of its own, but it is composite: autograd records the ops it calls"
    written = [a.name for a in op._schema.arguments if a.alias_info is not None and a.alias_info.is_write]
    returns = len(op._schema.returns)
    if written and not returns:
        return (f"NO autograd formula; it writes {', '.join(written)} in place and returns nothing, so autograd "
                "never sees the write: gradients flow through it unchanged, as if it were not there")
    if written:
        return (f"NO autograd formula; it writes {', '.join(written)} in place: autograd's fallback "
                f"({torch._C._get_autograd_fallback_mode()}) does not differentiate it")
    return (f"NO autograd formula: autograd's fallback ({torch._C._get_autograd_fallback_mode()}) gives no "
            "gradient through it")


def _custom_op_calls(function, args, kwargs, module) -> list:
    """(op, args, kwargs) of each call `function` makes to an op outside aten/prims, inputs as they were."""
    from torch.utils._python_dispatch import TorchDispatchMode

    calls = []

    class Recorder(TorchDispatchMode):
        def __torch_dispatch__(self, func, types_, args=(), kwargs=None):
            kwargs = kwargs or {}
            if getattr(func, "namespace", "aten") not in ("aten", "prim", "prims"):
                calls.append((func, _detached(args), _detached(kwargs)))
            return func(*args, **kwargs)

    try:
        with Recorder():
            _call(function, args, kwargs, False, module)
    except Exception as e:  # the layer under a dispatch mode: record what we can, say why the rest is missing
        calls.append(("(recording stopped: " + _first_line(e) + ")", (), {}))
    return [c for c in calls if not isinstance(c[0], str)]


def _first_per_op(calls: list) -> list:
    seen, first = set(), []
    for op, args, kwargs in calls:
        if str(op) not in seen:
            seen.add(str(op))
            first.append((op, args, kwargs))
    return first


def _opcheck(op, args, kwargs) -> dict:
    """opcheck's four tests on `op` with its recorded inputs; the floating ones it does not write to
    require grad, so the autograd registration test has something to test."""
    import torch

    written = {i for i, a in enumerate(op._schema.arguments) if a.alias_info is not None and a.alias_info.is_write}
    args = [a.detach().clone().requires_grad_(i not in written and a.is_floating_point())
            if isinstance(a, torch.Tensor) else a for i, a in enumerate(args)]
    results = {}
    for test in OPCHECK_TESTS:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                outcome = torch.library.opcheck(op, tuple(args), kwargs, test_utils=(test,), raise_exception=False)
            verdict = outcome.get(test, "SUCCESS")
            results[test] = "pass" if verdict == "SUCCESS" else _first_line(verdict)
        except Exception as e:
            results[test] = _first_line(e)
    return results


def _first_line(e) -> str:
    text = str(e).strip() or type(e).__name__
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    first = lines[0] if lines else type(e).__name__
    return (f"{type(e).__name__}: " if isinstance(e, BaseException) else "") + first[:300]


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception:
        traceback.print_exc()
        sys.exit(3)
