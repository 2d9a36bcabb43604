"""Issue 33: a Qwen3-0.6B-shaped training step, kbuild beside Liger-Kernel layer for layer, and what
held the memory. One process; every configuration gets a fresh model (same seed, same weights), the
same batch (4 x 1024 tokens, labels = input_ids) and its own AdamW, and runs STEPS training steps.

Configurations
  eager          transformers' Qwen3 untouched (sdpa attention).
  kbuild         the layers transformers marks for the hub that kbuild has kernels for: "RMSNorm" ->
                 kbuild/rmsnorm's RMSNorm layer (all 113 norms: input, post-attention, q_norm, k_norm,
                 final) and "rotary_pos_emb" (the function layer apply_rotary_pos_emb that every
                 Qwen3Attention carries) -> kbuild/rotary's RotaryPosEmb (q and k in one launch), fetched
                 from `kbuild hub serve` through HF_ENDPOINT (bench/gpu/qwen_step.sh). Path: transformers'
                 KernelConfig (`model.set_use_kernels(True, KernelConfig(...))`, what
                 from_pretrained(kernel_config=) runs) when transformers can use Hugging Face's `kernels`
                 (5.17 wants 0.16.x) and the model is on a GPU; otherwise kbuild's own layer API,
                 `kbuild.kernelize` with the same mapping, the classes and function marked with kbuild's
                 decorators as transformers marks them when `kernels` is installed. The H200 image has no
                 `kernels` 0.16 (the carried wheel is 0.17.2, which transformers 5.17 refuses), and
                 KernelConfig refuses "cpu", so both the H200 run and the CPU try take kbuild.kernelize;
                 "path" in the output says which ran.
                 Not mapped: "SiLU" (the MLP's act_fn is marked, but kbuild/activation's SiluAndMul takes
                 the concatenated gate|up, not one tensor); the fused SwiGLU MLP and the loss (Qwen3 marks
                 neither for the hub; kbuild has no fused linear cross-entropy).
  liger_same     Liger patching what kbuild maps: rms_norm=True, rope=True, swiglu/cross_entropy/
                 fused_linear_cross_entropy=False.
  liger_default  apply_liger_kernel_to_qwen3(model=...) with Liger's defaults (rope, rms_norm, swiglu,
                 fused linear cross-entropy): what a Liger user gets, and what earlier runs compared to.

Figures per configuration: step time (median of the steps after WARMUP, torch.cuda.synchronize
around each), peak memory (max_memory_allocated, reset before the model is built), the loss of every
step, and the breakdown of the second step (the first with optimizer state, so the steady one):
parameters, gradients and AdamW state bytes; activations saved for backward (saved_tensors_hooks
over the forward, unique storages, parameters left out), grouped by the module that saved them
(RMSNorm / MLP / attention / lm_head+loss / embedding+rotary) and by class; the memory allocated
before the forward and the peak of each phase (forward, backward, optimizer). `unexplained_at_peak`
= peak - parameters - optimizer state - gradients - saved activations: transients such as the
float32 logits of the loss and backward workspaces.

    python bench/gpu/qwen_step.py OUT.json [--local-rmsnorm PATH] [--local-rotary PATH]

Without a GPU it runs a tiny model (2 layers, hidden 64, vocab 1000, float32, CPU, short batch); the
Liger configurations are then reported absent with the reason, and kbuild maps RMSNorm only
(kbuild/rotary is Triton, a torch-cuda variant). --local-rmsnorm and --local-rotary take the kernels
from local project or build folders instead of the hub (for trying the script without a server).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import statistics
import time

import torch  # noqa: TID253 - a training step on the GPU image: torch is what it runs
from transformers import Qwen3Config, Qwen3ForCausalLM  # noqa: TID253 - as torch
from transformers.models.qwen3 import modeling_qwen3  # noqa: TID253 - as torch

import kbuild  # its names load on first use: the layer API only when a kbuild configuration runs

GPU = torch.cuda.is_available()
DEVICE, DTYPE = ("cuda", torch.bfloat16) if GPU else ("cpu", torch.float32)
SEED, STEPS, WARMUP = 0, 7, 2  # steps 0-1 warm up (step 1 is measured), 2-6 are timed
BATCH, SEQ = (4, 1024) if GPU else (2, 64)
RMSNORM_REPO = "kbuild/rmsnorm"
ROTARY_REPO = "kbuild/rotary"


class Absent(Exception):
    """A configuration that cannot run here; its message is the reason."""


def qwen3_config() -> Qwen3Config:
    """Qwen3-0.6B's shape on a GPU; a tiny one on the CPU."""
    shape = dict(hidden_size=1024, intermediate_size=3072, num_hidden_layers=28, num_attention_heads=16,
                 num_key_value_heads=8, head_dim=128, vocab_size=151936) if GPU else \
        dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, head_dim=16, vocab_size=1000)
    return Qwen3Config(tie_word_embeddings=True, max_position_embeddings=4096, attn_implementation="sdpa", **shape)


def fresh_model(config: Qwen3Config) -> Qwen3ForCausalLM:
    torch.manual_seed(SEED)  # same weights for every configuration
    with torch.device(DEVICE):
        model = Qwen3ForCausalLM(config)
    return model.to(DTYPE).train()


def batch(config: Qwen3Config) -> torch.Tensor:
    generator = torch.Generator().manual_seed(SEED)
    return torch.randint(0, config.vocab_size, (BATCH, SEQ), generator=generator).to(DEVICE)


# --- the configurations: each patches a fresh model and says what it mapped ---------------------

def apply_eager(model, args) -> dict:
    return {"mapped": []}


def transformers_hub_names(model) -> dict:
    """Which hub names transformers itself marked on this model (empty without `kernels` 0.16)."""
    names: dict[str, int] = {}
    for module in model.modules():
        for name in [getattr(type(module), "kernel_layer_name", None), *getattr(module, "_kernel_funcs", {})]:
            if name:
                names[name] = names.get(name, 0) + 1
    return names


def kernel_config_usable() -> bool:
    from transformers.utils import is_kernels_available
    return GPU and is_kernels_available()


def kernelize_through_kernel_config(model) -> None:
    """transformers' own path; inherit_mapping=False so its default rotary mapping (kernels-community,
    not on the local hub) is not pulled in: exactly kbuild's mapping."""
    from transformers import KernelConfig
    mapping = {"RMSNorm": (f"{RMSNORM_REPO}:RMSNorm", {"version": 1, "trust_remote_code": True}),
               "rotary_pos_emb": (f"{ROTARY_REPO}:RotaryPosEmb", {"version": 1, "trust_remote_code": True})}
    model.set_use_kernels(True, KernelConfig(mapping, inherit_mapping=False))


def mark_qwen3_for_kbuild() -> None:
    """What transformers marks at import when `kernels` is installed (and leaves unmarked without
    it), marked with kbuild's decorators: Qwen3RMSNorm, the function apply_rotary_pos_emb, and
    Qwen3Attention carrying it. Before the model is built (use_kernelized_func acts in __init__);
    restored_qwen3_module undoes it."""
    if getattr(modeling_qwen3.Qwen3RMSNorm, "kernel_layer_name", None) is None:
        kbuild.replace_kernel_forward_from_hub(modeling_qwen3.Qwen3RMSNorm, "RMSNorm")
    if getattr(modeling_qwen3.apply_rotary_pos_emb, "kernel_layer_name", None) is None:
        # Qwen3Attention.forward calls the module's global by name: the function layer takes its place
        layer = kbuild.use_kernel_forward_from_hub("rotary_pos_emb")(modeling_qwen3.apply_rotary_pos_emb)
        modeling_qwen3.apply_rotary_pos_emb = layer
        kbuild.use_kernelized_func(layer)(modeling_qwen3.Qwen3Attention)


def kernelize_through_kbuild(model, args) -> None:
    def source(local: str | None, repo: str, layer: str):
        return {DEVICE: kbuild.LocalLayerRepository(local, layer_name=layer)} if local else f"{repo}@v1:{layer}"
    mapping = {"RMSNorm": source(args.local_rmsnorm, RMSNORM_REPO, "RMSNorm")}
    if GPU:  # kbuild/rotary is Triton: a torch-cuda variant only
        mapping["rotary_pos_emb"] = source(args.local_rotary, ROTARY_REPO, "RotaryPosEmb")
    # the default fallback: other names transformers marks (e.g. SiLU) keep their own forward
    kbuild.kernelize(model, mapping, mode=kbuild.Mode.TRAINING, device=DEVICE)


def bound_rotary_forwards(model) -> list[str]:
    """The forwards of the rotary function layers the attention modules carry."""
    layers = {id(f): f for m in model.modules() for f in getattr(m, "_kernel_funcs", {}).values()}
    return sorted({f"{f.forward.__func__.__module__}.{f.forward.__func__.__qualname__}" for f in layers.values()
                   if getattr(f, "kernel_layer_name", None) == "rotary_pos_emb"})


def bound_norm_forwards(model) -> list[str]:
    norms = [m for m in model.modules() if isinstance(m, modeling_qwen3.Qwen3RMSNorm)]
    forwards = (getattr(m.forward, "__func__", m.forward) for m in norms)
    return sorted({f"{f.__module__}.{f.__qualname__}" for f in forwards})


def kbuild_path(args) -> str:
    local = args.local_rmsnorm or args.local_rotary
    return "transformers.KernelConfig" if kernel_config_usable() and not local else "kbuild.kernelize"


def prepare_kbuild(args) -> None:
    if kbuild_path(args) == "kbuild.kernelize":
        mark_qwen3_for_kbuild()


def apply_kbuild(model, args) -> dict:
    marked = transformers_hub_names(model)
    path = kbuild_path(args)
    t0 = time.perf_counter()
    if path == "transformers.KernelConfig":
        kernelize_through_kernel_config(model)
    else:
        kernelize_through_kbuild(model, args)
    norms, rotary = bound_norm_forwards(model), bound_rotary_forwards(model)
    rotary_left = GPU and (not rotary or any("RotaryPosEmb" not in f for f in rotary))
    if any("Qwen3RMSNorm" in f for f in norms) or rotary_left:
        raise RuntimeError(f"kernelize left a layer of Qwen3's own: norms {norms}, rotary {rotary}")
    cpu_only = {} if GPU else {
        "rotary_pos_emb": "kbuild/rotary is Triton, built as torch-cuda only: no variant for cpu"}
    return {"path": path, "kernelize_s": round(time.perf_counter() - t0, 3),
            "mapped": ["RMSNorm", "rotary_pos_emb"] if GPU else ["RMSNorm"],
            "transformers_hub_names": marked, "norm_forwards": norms, "rotary_forwards": rotary,
            "not_mapped": {**cpu_only,
                           "SiLU": "marked (the MLP's act_fn); kbuild/activation has SiluAndMul on [.., 2d], "
                                   "not an elementwise SiLU",
                           "Qwen3MLP / SwiGLU": "not marked for the hub by transformers 5.17",
                           "lm_head + loss": "not marked for Qwen3; kbuild has no fused linear cross-entropy"}}


def liger_qwen3():
    if not GPU:
        raise Absent("no GPU: Liger-Kernel's kernels are Triton, CUDA only")
    try:
        from liger_kernel.transformers import apply_liger_kernel_to_qwen3  # noqa: PLC0415 - optional package
    except Exception as error:  # noqa: BLE001 - any import failure is the reason it is absent
        raise Absent(f"liger_kernel not importable: {type(error).__name__}: {error}") from None
    return apply_liger_kernel_to_qwen3


def apply_liger_same(model, args) -> dict:
    flags = dict(rope=True, rms_norm=True, swiglu=False, cross_entropy=False, fused_linear_cross_entropy=False)
    liger_qwen3()(model=model, **flags)
    return {"mapped": ["RMSNorm", "rotary_pos_emb"], "liger_flags": flags}


def apply_liger_default(model, args) -> dict:
    liger_qwen3()(model=model)
    return {"mapped": ["RMSNorm", "rotary_pos_emb", "SwiGLU MLP", "fused linear cross-entropy"],
            "liger_flags": "defaults"}


CONFIGS = {"eager": apply_eager, "kbuild": apply_kbuild, "liger_same": apply_liger_same,
           "liger_default": apply_liger_default}
PREPARE = {"kbuild": prepare_kbuild}  # before the model is built


@contextlib.contextmanager
def restored_qwen3_module():
    """Liger rebinds names in modeling_qwen3 (Qwen3RMSNorm, apply_rotary_pos_emb, Qwen3MLP), and
    kbuild's marks set class attributes (kernel_layer_name, Qwen3Attention.__init__); put them back so
    no configuration leaks into the next one."""
    saved = dict(vars(modeling_qwen3))
    classes = {cls: dict(vars(cls)) for cls in (modeling_qwen3.Qwen3RMSNorm, modeling_qwen3.Qwen3Attention)}
    try:
        yield
    finally:
        vars(modeling_qwen3).update(saved)
        for cls, attributes in classes.items():
            for name in set(vars(cls)) - set(attributes):
                delattr(cls, name)
            for name, value in attributes.items():
                if name not in ("__dict__", "__weakref__") and vars(cls).get(name) is not value:
                    setattr(cls, name, value)


# --- memory accounting ---------------------------------------------------------------------------

def storage_key(tensor: torch.Tensor):
    storage = tensor.untyped_storage()
    return (tensor.device, storage.data_ptr()), storage.nbytes()


def tensors_bytes(tensors) -> int:
    return sum(nbytes for _, nbytes in dict(storage_key(t) for t in tensors if t is not None).items())


def optimizer_state_bytes(optimizer) -> int:
    return tensors_bytes(v for state in optimizer.state.values() for v in state.values() if torch.is_tensor(v))


def group_of(stack: list[tuple[str, str]]) -> str:
    """The module group a saved tensor belongs to: the innermost frame that names one."""
    for name, cls in reversed(stack):
        if "RMSNorm" in cls:
            return "RMSNorm"
        if "MLP" in cls:
            return "MLP"
        if "Attention" in cls:
            return "attention (q/k/v/o proj, rope, sdpa)"
        if name.endswith("lm_head") or "ForCausalLM" in cls:
            return "lm_head+loss"
        if cls.endswith("Model"):
            return "embedding+rotary+mask"
        if "DecoderLayer" in cls:
            return "decoder layer (residual)"
    return "other"


class SavedActivations:
    """Bytes of the unique storages autograd saves during a forward, by module group and by class.
    Parameters (saved by every matmul) are left out: they are counted once, as parameters."""

    def __init__(self, model):
        self.model, self.stack, self.seen = model, [], set()
        self.param_keys = {storage_key(p)[0] for p in model.parameters()}
        self.by_group: dict[str, int] = {}
        self.by_class: dict[str, int] = {}
        self.handles = []

    def __enter__(self):
        for name, module in self.model.named_modules():
            frame = (name, type(module).__name__)
            self.handles.append(module.register_forward_pre_hook(lambda m, a, f=frame: self.stack.append(f)))
            self.handles.append(module.register_forward_hook(lambda m, a, o: self.pop()))
        self.hooks = torch.autograd.graph.saved_tensors_hooks(self.pack, lambda t: t)
        self.hooks.__enter__()
        return self

    def __exit__(self, *exc):
        self.hooks.__exit__(*exc)
        for handle in self.handles:
            handle.remove()

    def pop(self) -> None:
        self.stack.pop()  # returns None: a forward hook's return value would replace the output

    def pack(self, tensor):
        key, nbytes = storage_key(tensor)
        if key[1] and key not in self.seen and key not in self.param_keys:
            self.seen.add(key)
            group, cls = group_of(self.stack), self.stack[-1][1] if self.stack else "none"
            self.by_group[group] = self.by_group.get(group, 0) + nbytes
            self.by_class[cls] = self.by_class.get(cls, 0) + nbytes
        return tensor

    def report(self) -> dict:
        ranked = lambda d: dict(sorted(d.items(), key=lambda kv: -kv[1]))  # noqa: E731
        return {"total": sum(self.by_group.values()), "by_group": ranked(self.by_group),
                "by_class": ranked(self.by_class)}


class Peaks:
    """Peak allocated memory per phase, folded into one overall peak (a reset would lose it)."""

    def __init__(self):
        self.overall = 0
        if GPU:
            torch.cuda.reset_peak_memory_stats()

    def mark(self) -> int | None:
        if not GPU:
            return None
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated()
        self.overall = max(self.overall, peak)
        torch.cuda.reset_peak_memory_stats()
        return peak


def allocated() -> int | None:
    return torch.cuda.memory_allocated() if GPU else None


# --- the steps ---------------------------------------------------------------------------------

def synchronize():
    if GPU:
        torch.cuda.synchronize()


def timed_step(model, optimizer, ids) -> tuple[float, float]:
    synchronize()
    t0 = time.perf_counter()
    optimizer.zero_grad(set_to_none=True)
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    optimizer.step()
    synchronize()
    return time.perf_counter() - t0, loss.item()


def measured_step(model, optimizer, ids, peaks: Peaks) -> tuple[float, dict]:
    """One untimed step, phase by phase, with the saved activations counted."""
    optimizer.zero_grad(set_to_none=True)
    peaks.mark()
    before_forward = allocated()
    with SavedActivations(model) as saved:
        loss = model(input_ids=ids, labels=ids).loss
    forward_peak = peaks.mark()
    loss.backward()
    backward_peak = peaks.mark()
    grads = tensors_bytes(p.grad for p in model.parameters())
    optimizer.step()
    optimizer_peak = peaks.mark()
    return loss.item(), {"allocated_before_forward": before_forward, "forward_peak": forward_peak,
                         "backward_peak": backward_peak, "optimizer_peak": optimizer_peak, "gradients": grads,
                         "saved_activations": saved.report()}


def run_config(name: str, config: Qwen3Config, ids, args) -> dict:
    free_memory()
    peaks = Peaks()
    with restored_qwen3_module():
        if name in PREPARE:
            PREPARE[name](args)
        model = fresh_model(config)
        try:
            setup = CONFIGS[name](model, args)
        except Absent as reason:
            return {"absent": str(reason)}
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        params = tensors_bytes(model.parameters())
        times, losses = [], []
        for step in range(STEPS):
            if step == 1:
                loss, breakdown = measured_step(model, optimizer, ids, peaks)
            else:
                seconds, loss = timed_step(model, optimizer, ids)
                if step >= WARMUP:
                    times.append(seconds)
            losses.append(loss)
        peaks.mark()
        breakdown.update(parameters=params, optimizer_state=optimizer_state_bytes(optimizer))
        del model, optimizer
    return {**setup, "step_s": statistics.median(times), "step_s_all": times, "losses": losses,
            "peak_bytes": peaks.overall if GPU else None, "memory": with_unexplained(breakdown, peaks.overall)}


def with_unexplained(breakdown: dict, peak: int) -> dict:
    if GPU:
        held = breakdown["parameters"] + breakdown["optimizer_state"] + breakdown["gradients"]
        breakdown["unexplained_at_peak"] = peak - held - breakdown["saved_activations"]["total"]
    return breakdown


def free_memory():
    gc.collect()
    if GPU:
        torch.cuda.empty_cache()


def compare(results: dict) -> dict:
    """kbuild's figures over each Liger configuration's (issue 33's targets: memory <= 1.05, time <= 1)."""
    kb = results.get("kbuild", {})
    ratios = {}
    for other in ("eager", "liger_same", "liger_default"):
        theirs = results.get(other, {})
        if "step_s" in kb and "step_s" in theirs:
            ratios[f"kbuild/{other}"] = {"step_s": round(kb["step_s"] / theirs["step_s"], 3),
                                         "peak": round(kb["peak_bytes"] / theirs["peak_bytes"], 3) if GPU else None}
    return ratios


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--local-rmsnorm", help="kbuild/rmsnorm from this project or build folder, not the hub")
    parser.add_argument("--local-rotary", help="kbuild/rotary from this project or build folder, not the hub")
    parser.add_argument("--configs", default=",".join(CONFIGS), help=f"some of {','.join(CONFIGS)}")
    args = parser.parse_args()
    unknown = [c for c in args.configs.split(",") if c not in CONFIGS]
    if unknown:
        parser.error(f"argument --configs: unknown {', '.join(unknown)} (choose from {', '.join(CONFIGS)})")
    folder = os.path.dirname(os.path.abspath(args.out))
    if not os.path.isdir(folder):  # said now, not after minutes of training
        parser.error(f"argument out: {folder} is not a folder")
    config = qwen3_config()
    ids = batch(config)
    result = {"gpu": torch.cuda.get_device_name() if GPU else None, "torch": torch.__version__,
              "dtype": str(DTYPE).removeprefix("torch."), "batch": [BATCH, SEQ], "steps": STEPS, "warmup": WARMUP,
              "layers": config.num_hidden_layers, "hidden": config.hidden_size, "vocab": config.vocab_size,
              "configs": {}}
    for name in args.configs.split(","):
        try:
            result["configs"][name] = run_config(name, config, ids, args)
        except Exception as error:  # noqa: BLE001 - one failing configuration must not lose the others
            result["configs"][name] = {"error": f"{type(error).__name__}: {error}"}
        print(name, json.dumps({k: v for k, v in result["configs"][name].items() if k != "memory"}), flush=True)
    result["ratios"] = compare(result["configs"])
    with open(args.out, "w") as out:
        json.dump(result, out, indent=2)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
