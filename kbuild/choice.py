"""Which variant a loader takes: every name parsed once and judged (kbuild.fit), the fitting ones
in kernels 0.19's order, the others with why; the trace the errors and the CLI show.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .fit import Verdict, judge
from .variants import (
    DEVICE_NAMES,
    PYTHON_ABIS,
    Noarch,
    Sdk,
    SystemInfo,
    Torch,
    TorchStableAbi,
    TvmFfi,
    Universal,
    Variant,
    parse_variant,
)


@dataclass(frozen=True)
class Candidate:
    """One entry of a resolution trace: a name, its parse, and why it was rejected (or None)."""

    name: str
    variant: Variant | None
    reason: str | None
    note: str | None = None  # why a fitting variant is ranked where it is

    @property
    def accepted(self) -> bool:
        return self.reason is None


def resolve(names: list[str], system: SystemInfo) -> list[Candidate]:
    """Every name judged against `system`: accepted ones best-first, then the rejected ones."""
    candidates = []
    for name in names:
        try:
            variant = parse_variant(name)
        except ValueError:
            candidates.append(Candidate(name, None, "not a variant name"))
            continue
        reason = judge(variant, system).reason
        note = None
        if reason is None and system.cpu_first and variant.backend == system.backend:
            note = f"after CPU variants: no {DEVICE_NAMES.get(system.backend, system.backend)} device is visible"
        candidates.append(Candidate(name, variant, reason, note))
    cpu_first = system.cpu_first
    fitting = [(c, c.variant) for c in candidates if c.accepted and c.variant is not None]
    fitting.sort(key=lambda cv: (not (cpu_first and cv[1].backend == "cpu"), preference(cv[1]), cv[0].name))
    rejected = sorted((c for c in candidates if not c.accepted), key=lambda c: c.name)
    return [c for c, _ in fitting] + rejected


def reject(trace: list[Candidate], name: str, reason: str) -> list[Candidate]:
    """The trace with candidate `name` rejected for `reason` (found out after resolve, e.g. from
    its metadata): the accepted ones keep their order, the rejected ones stay sorted by name."""
    accepted = [c for c in trace if c.accepted and c.name != name]
    rejected = [Candidate(c.name, c.variant, reason if c.name == name else c.reason, c.note) for c in trace
                if not c.accepted or c.name == name]
    return accepted + sorted(rejected, key=lambda c: c.name)


def annotate(trace: list[Candidate], name: str, note: str) -> list[Candidate]:
    """The trace with `note` added to candidate `name` (what a check of its metadata found)."""
    return [replace(c, note="; ".join(filter(None, (c.note, note)))) if c.name == name else c for c in trace]


def apply(trace: list[Candidate], name: str, verdict: Verdict) -> list[Candidate]:
    """The trace with `verdict` (kbuild.fit's, from its metadata) on candidate `name`: rejected
    with its reason, or noted."""
    if verdict.reason:
        return reject(trace, name, verdict.reason)
    return annotate(trace, name, verdict.note) if verdict.note else trace


def choose(names: list[str], system: SystemInfo) -> Candidate | None:
    """The best variant for `system`, or None when nothing fits."""
    best = resolve(names, system)
    return best[0] if best and best[0].accepted else None


def preference(variant: Variant) -> tuple:
    """The sort key of a fitting variant, lower first: kernels 0.19's `_sort_variants`, so both
    loaders take the same variant from the same names. Stable ABI (newest ABI first), then
    compiled (a name without a C++ ABI tag before a tagged one), tvm-ffi, SDK builds with compiled
    code, Python-only `torch-<backend>`, `torch-universal`, `sdk-<backend>`, `sdk`; within a kind
    the highest compatible CUDA/ROCm minor, then abi3 before abi3t and the newest minimum Python.
    Names that tie (one build under both name forms) are taken by name."""
    minor = -variant.compute_version[1] if variant.compute_version else 0
    python = variant.min_python
    python_order = (PYTHON_ABIS.index(variant.python_abi), -python[0], -python[1]) if python else (0, 0, 0)
    framework = variant.framework
    if isinstance(framework, TorchStableAbi):
        return (0, -framework.version[0], -framework.version[1], minor, *python_order)
    if isinstance(framework, Torch):
        return (1, 0, 0 if framework.cxx11 is None or variant.os != "linux" else 1, minor, *python_order)
    if isinstance(framework, TvmFfi):
        return (2, 0, 0, minor, *python_order)
    if isinstance(framework, Sdk) and python is not None:
        return (3, 0, 0, minor if variant.backend else 1, *python_order)
    if isinstance(framework, (Noarch, Universal)):
        return (4, 0, 0, 1 if isinstance(framework, Universal) else 0, 0, 0, 0)
    return (5 if variant.backend else 6, 0, 0, 0, 0, 0, 0)


def format_trace(candidates: list[Candidate]) -> str:
    """The resolution trace, one line per candidate, as shown in errors and by the CLI."""
    lines = []
    for c in candidates:
        fits = f"fits ({c.note})" if c.note else "fits"
        lines.append(f"  {c.name}: " + (fits if c.accepted else f"rejected ({c.reason})"))
    return "\n".join(lines)
