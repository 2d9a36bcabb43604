"""The workspace's matrix cut into CI slices: groups of variant names of about equal estimated
compile time, one per job (`kbuild matrix --slices N --github`). Each job builds its slice with
`kbuild build --variant …` and publishes it to the shared version branch; publishing keeps the
other slices' variants, so N jobs end with the whole matrix on the branch.

A slice holds whole variant names (`torch214-cxx11-cu130-x86_64-linux`), built for every kernel of
the workspace that has it: one variant name is one toolchain, so no job provisions a torch or an
nvcc for one kernel's sake. The estimate is in "C++ compile" units from the manifests alone (no
toolchain is needed to plan): a .cpp is 1, a .cu is 2 per CUDA arch it is compiled for, a
Python-only variant 0.1. Slices are filled longest first (LPT), which keeps the longest job within
4/3 of the best split.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from builder.backends import DEVICE_SOURCES
from builder.plan.matrix import Matrix, MatrixVariant, matrix_variants, select, variant_archs
from builder.project.manifest import Manifest, load_manifest
from builder.project.workspace import kernel_dirs, workspace_matrix

CU_PER_ARCH = 2.0
CXX = 1.0
PYTHON_ONLY = 0.1
# what the host C++ compiler compiles, and each backend's device sources (.cu), which cost per arch
_HOST = (".cpp", ".cc", ".cxx", ".c")
_COMPILED = (*_HOST, *DEVICE_SOURCES)


@dataclass(frozen=True)
class Slice:
    variants: tuple[str, ...]
    estimate: float
    kernels: tuple[str, ...]  # the kernels it builds something for


def estimate(m: Manifest, mv: MatrixVariant) -> float:
    """The compile cost of one kernel's variant, in C++-compile units."""
    if mv.target is None:
        return PYTHON_ONLY
    backend = mv.variant.backend
    toolkit = mv.target.toolkit
    archs = len(variant_archs(m, toolkit)) if toolkit else 0
    sources = [s for s in (m.torch.src if m.torch else ()) if s.endswith(_COMPILED)]
    sources += [s for section in m.kernels_for(backend) for s in section.src if s.endswith(_COMPILED)]
    return sum(CXX if s.endswith(_HOST) else CU_PER_ARCH * max(archs, 1) for s in sources)


def costs(kernels: list[Manifest], matrix: Matrix) -> dict[str, dict[str, float]]:
    """variant name -> {kernel name: estimated cost} over the workspace."""
    out: dict[str, dict[str, float]] = {}
    for m in kernels:
        for mv in matrix_variants(m, matrix)[0]:
            out.setdefault(mv.variant.name, {})[m.name] = estimate(m, mv)
    return out


def workspace_costs(folder: Path) -> tuple[list[Manifest], dict[str, dict[str, float]]]:
    """The kernels of `folder` (one, or a workspace's members) and their `costs` over the
    workspace's matrix ([workspace.matrix], else versions.toml's)."""
    choice, where = workspace_matrix(folder)
    matrix = select(choice, where)
    kernels = [load_manifest(d) for d in kernel_dirs(folder)]
    return kernels, costs(kernels, matrix)


def plan_slices(per_variant: dict[str, dict[str, float]], n: int) -> list[Slice]:
    """At most `n` slices (never an empty one), the costliest variant names placed first, each into
    the slice with the least work so far; ties go to the name, so the plan is stable."""
    if n < 1:
        raise ValueError("the number of slices must be at least 1")
    order = sorted(per_variant, key=lambda name: (-sum(per_variant[name].values()), name))
    bins: list[list[str]] = [[] for _ in range(min(n, len(order)))]
    loads = [0.0] * len(bins)
    for name in order:
        i = min(range(len(bins)), key=lambda k: (loads[k], k))
        bins[i].append(name)
        loads[i] += sum(per_variant[name].values())
    return [Slice(tuple(sorted(names)), round(load, 1),
                  tuple(sorted({k for name in names for k in per_variant[name]})))
            for names, load in sorted(zip(bins, loads, strict=True), key=lambda pair: -pair[1])]
