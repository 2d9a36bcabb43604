"""What a variant's metadata.json says about loading it here, before anything of it is imported:
its `kernels-minver` against the formats this loader reads, its ABI floor against this host's C
libraries, its GPU archs against this device, and its python-depends against this environment.
Name-level fit (torch, CUDA, platform) is kbuild.variants'; every loader applies both, so the
trace, `kbuild info` and the errors agree.
"""

from __future__ import annotations

from dataclasses import dataclass

from .gpu_arch import Fit, device_fit
from .host_abi import floor_problem
from .metadata import READS_KERNELS, VariantMetadata
from .python_depends import missing
from .variants import NOARCH, UNIVERSAL, Candidate, SystemInfo, annotate, parse_variant, reject


@dataclass(frozen=True)
class Verdict:
    reason: str | None = None  # why the variant cannot load here; None: it can, as far as is known
    note: str | None = None  # what a check of a fitting variant found worth telling


def judge(meta: VariantMetadata | None, name: str, system: SystemInfo) -> Verdict:
    """The verdict on variant `name` whose metadata is `meta` (None: unknown, nothing checked)."""
    if meta is None:
        return Verdict()
    if meta.kernels_minver is not None and meta.kernels_minver > READS_KERNELS:
        # a format newer than this loader knows: another variant may still fit, so a rejection in
        # the trace rather than kernels 0.19's error at import
        return Verdict(f"needs a loader of kernels >= {meta.kernels_minver}'s formats (kernels-minver); this kbuild "
                       f"reads those of kernels {READS_KERNELS}: upgrade kbuild")
    if problem := floor_problem(meta.abi, system.glibc, system.glibcxx):
        return Verdict(problem)
    backend = _backend(meta, name, system)
    archs = meta.backend.archs if meta.backend else ()
    # a Python-only build has no device code, so no archs to record: nothing to say about it
    device = device_fit(backend, archs, _device_for(backend, system)) if archs or _compiled(name) else Fit()
    if device.problem:
        return Verdict(device.problem)
    depends = missing(meta.python_depends, backend) if system.python_env else None
    return Verdict(depends, device.note)


def apply(trace: list[Candidate], name: str, verdict: Verdict) -> list[Candidate]:
    """The trace with `verdict` on candidate `name`: rejected with its reason, or noted."""
    if verdict.reason:
        return reject(trace, name, verdict.reason)
    return annotate(trace, name, verdict.note) if verdict.note else trace


def _backend(meta: VariantMetadata, name: str, system: SystemInfo) -> str:
    """The variant's backend: as recorded, else its name's; a universal build's is this system's."""
    if meta.backend:
        return meta.backend.type
    try:
        return parse_variant(name).backend or system.backend
    except ValueError:  # a variant folder the caller named: it runs on this system's backend
        return system.backend


def _compiled(name: str) -> bool:
    try:
        return parse_variant(name).kind not in (NOARCH, UNIVERSAL)
    except ValueError:  # a folder the caller named: it may hold anything
        return True


def _device_for(backend: str, system: SystemInfo) -> str | None:
    # a CPU variant chosen on a CUDA torch has no device code to check against its GPU
    return system.gpu_arch if backend == system.backend else None
