"""Which built variants `kbuild test` and `kbuild bench` run on this machine, and with which
devices in view: one rule for both.

By default a variant runs when kbuild's loader would pick it here (kbuild.loading.judge_folder:
its name, then its metadata, against the torch that runs the suites or benchmarks), and a CPU
variant runs as it will run beside a GPU: with every GPU hidden from its process. The rest are
left out, each with the loader's reason; `--variant` runs the named ones whatever the loader says.
"""

from __future__ import annotations

import difflib
import json
import os
import sys
import tempfile
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

import packaging

import kbuild
from builder import resources
from builder.layout import BUILD_DIR
from kbuild.errors import KernelError
from kbuild.loading import judge_folder
from kbuild.variants import NOARCH, SystemInfo, parse_variant
from kbuild_common import proc
from kbuild_common.errors import CommandError, ToolchainError, UsageError

_PROBE = "kbuild_system_probe"  # builder/templates/kbuild_system_probe.py

# What makes torch see no GPU: CUDA's variable; HIP's (a ROCm torch reads it before
# CUDA_VISIBLE_DEVICES); Level Zero's mask and the oneAPI device selector (an XPU torch counts
# devices through the first and opens them through the second). Metal has no such switch.
HIDE_GPUS = {"CUDA_VISIBLE_DEVICES": "", "HIP_VISIBLE_DEVICES": "", "ZE_AFFINITY_MASK": "",
             "ONEAPI_DEVICE_SELECTOR": "opencl:cpu"}


@dataclass(frozen=True)
class Target:
    """The torch that runs the suites or benchmarks, as the loader sees it."""

    system: SystemInfo
    torch_version: str  # torch.__version__, for messages

    def describe(self) -> str:
        # the loader's words, with the full torch version for its "torch X.Y"
        return f"torch {self.torch_version}, {self.system.describe().split(', ', 1)[1]}"


@dataclass(frozen=True)
class Choice:
    variant: Path
    hide_gpus: bool = False  # a CPU variant: its suite or benchmarks see no GPU
    left_out: str = ""  # why it is not run here ("": it is)
    forced: str = ""  # why the loader would not pick it, when --variant asked for it anyway

    @property
    def as_asked(self) -> str:
        """What a run's line adds for a forced variant: `, as --variant asks: the loader would not
        pick it here (why)`; "" for one the loader picks."""
        return f", as --variant asks: the loader would not pick it here ({self.forced})" if self.forced else ""


def probe(python: str) -> Target:
    """kbuild.variants.detect_system run in `python` (kbuild's runtime and, as a fallback,
    `packaging` lent to it on sys.path), so the judgement is the loader's, of that torch."""
    with tempfile.TemporaryDirectory(prefix="kbuild-probe-") as tmp:
        first, last = Path(tmp) / "first", Path(tmp) / "last"
        first.mkdir()
        last.mkdir()
        (first / "kbuild").symlink_to(Path(kbuild.__file__).parent, target_is_directory=True)
        (last / "packaging").symlink_to(Path(packaging.__file__).parent, target_is_directory=True)
        script = Path(tmp) / f"{_PROBE}.py"
        script.write_bytes(resources.read_bytes(f"templates/{_PROBE}.py"))
        try:
            out = proc.run([python, str(script), str(first), str(last)], timeout=300, what="device probe").stdout
        except CommandError as e:
            last_line = (e.output_tail.strip().splitlines() or [""])[-1]
            raise ToolchainError(f"cannot ask the torch of {python} which devices it sees: {last_line}") from None
    data = json.loads(out.strip().splitlines()[-1])
    system: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in data["system"].items()}  # JSON
    known = {f.name for f in fields(SystemInfo)}
    info = SystemInfo(**{k: v for k, v in system.items() if k in known})
    if data["prefix"] != sys.prefix:
        # python-depends are judged against the packages of this Python, not that one's
        info = replace(info, python_env=False)
    return Target(info, data["torch_version"])


def gpu_visible(system: SystemInfo) -> bool:
    """Whether the torch of `system` sees a GPU that CUDA and ROCm variants run on."""
    return system.backend in ("cuda", "rocm") and system.device_visible


@dataclass(frozen=True)
class Placement:
    """Where a chosen variant's suite or benchmarks run, and what their process's environment adds."""

    device: str  # the device its code is given: "cuda" (ROCm's torch names its GPUs so too) or "cpu"
    env: dict[str, str]
    where: str  # the words for it in a run's line: "on cpu (Triton interpreter)"
    gpu_missing: bool = False  # compiled for a GPU, and none is visible: what needs one cannot run


def place(variant: str, hide_gpus: bool, has_gpu: bool, runs: str) -> Placement:
    """How `kbuild test` and `kbuild bench` run `variant` (a folder name; `hide_gpus` its Choice's):
    a CPU variant as it will run beside a GPU, with every GPU hidden; a GPU variant on the GPU; a
    Triton kernel (noarch, for CUDA or ROCm) with no GPU here on the CPU under Triton's interpreter;
    a compiled GPU variant with no GPU here on "cuda", marked gpu_missing (a suite's GPU tests skip
    themselves; benchmarks have nothing to run). `runs`: "suite", "benchmarks", for the words."""
    if hide_gpus:
        return Placement("cpu", dict(HIDE_GPUS), f"on cpu (no GPU visible to the {runs})")
    v = parse_variant(variant)
    if v.backend not in ("cuda", "rocm"):
        return Placement("cpu", {}, "on cpu")
    if has_gpu:
        return Placement("cuda", {}, "on cuda")
    if v.kind == NOARCH:
        return Placement("cpu", {"TRITON_INTERPRET": "1"}, "on cpu (Triton interpreter)")
    # not "on cuda": there is none
    return Placement("cuda", {}, "without a GPU", gpu_missing=True)


def import_variant_from(folder: Path, python_name: str, variant_dir: Path, pythonpath: str | None) -> dict[str, str]:
    """What a suite's, benchmark's or layer check's process adds to its environment to import
    `variant_dir` as `python_name`: the variant linked into `folder` (a temporary one), put ahead of
    the caller's PYTHONPATH (which stays: packages the code imports may live there), and no
    bytecode written, since nothing may be added to a variant (its files are digest-checked and
    published) or to the kernel's own folders (its tests/ and benchmarks/)."""
    (folder / python_name).symlink_to(variant_dir.resolve(), target_is_directory=True)
    return {"PYTHONPATH": os.pathsep.join(p for p in (str(folder), pythonpath) if p), "PYTHONDONTWRITEBYTECODE": "1"}


def probe_once(python: str, reporter, runs: str) -> Target:
    """`probe(python)` in a phase of `reporter`'s, then the line saying where `runs` ("suites",
    "benchmarks") run."""
    with reporter.phase(f"asking the torch of {python} which devices it sees"):
        target = probe(python)
    reporter.info(f"{runs} run in {target.describe()}")
    return target


def choose(build_dir: Path, built: list[Path], target: Target, named: bool, does: str = "tests") -> list[Choice]:
    """What to do with each of `built` (variant folders in `build_dir`); `named`: the user named
    them with --variant, so each runs, saying why the loader would not pick it; `does`: what
    --variant does with a left-out one, in its reason ("tests", "benchmarks")."""
    system = target.system
    here = _verdicts(build_dir, system)
    # a CPU variant is judged as the loader judges it with backend="cpu", the GPU out of the way
    cpu = _verdicts(build_dir, system.as_cpu()) if system.backend != "cpu" else here
    choices = []
    for folder in built:
        try:
            is_cpu = parse_variant(folder.name).backend == "cpu"
        except ValueError as e:
            choices.append(Choice(folder, left_out=str(e)))
            continue
        why = (cpu if is_cpu else here).get(folder.name, "not judged")
        if why is None:
            choices.append(Choice(folder, hide_gpus=is_cpu))
        elif named:
            choices.append(Choice(folder, hide_gpus=is_cpu, forced=why))
        else:
            choices.append(Choice(folder, left_out=f"{why}: the loader would not pick it here "
                                                   f"(--variant {folder.name} {does} it anyway)"))
    return choices


def _verdicts(build_dir: Path, system: SystemInfo) -> dict[str, str | None]:
    """Each variant folder's reason the loader would refuse it on `system` (None: it fits)."""
    try:
        trace = judge_folder(build_dir, system)
    except KernelError as e:  # a metadata.json the loader cannot read: the loader's one line
        raise UsageError(str(e)) from None
    return {c.name: c.reason for c in trace}


def check_named(folder: Path, kernels: list[Path], variants: tuple[str, ...]) -> None:
    """Each name given with --variant is built for at least one of `kernels` (those of `folder`),
    or one error says which is not, with the nearest built name or what is built: a misspelt name
    is never dropped in silence beside the ones that matched."""
    built = sorted({p.name for kernel in kernels for p in built_variants(kernel / BUILD_DIR, ())})
    unknown = [v for v in variants if v not in built]
    if not unknown:
        return
    names = ", ".join(unknown)
    if len(kernels) == 1:
        message = f"{kernels[0]}: no built variant named {names} in {kernels[0] / BUILD_DIR}"
    else:
        message = f"{folder}: no kernel there has a built variant named {names}"
    close = difflib.get_close_matches(unknown[0], built, n=1, cutoff=0.75)
    if close:
        hint = f"did you mean --variant {close[0]}?"
    elif built:
        hint = f"built there: {', '.join(built)}"
    else:
        hint = f"run kbuild build {folder} first"
    raise UsageError(message, hint=hint)


def built_variants(build_dir: Path, only: tuple[str, ...]) -> list[Path]:
    if not build_dir.is_dir():
        return []
    found = sorted(p for p in build_dir.iterdir() if p.is_dir() and not p.name.startswith(".")
                   and (p / "metadata.json").is_file())
    return [p for p in found if not only or p.name in only]
