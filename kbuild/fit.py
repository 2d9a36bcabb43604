"""Whether a variant can load on a system, and if not why: the one judge every loader, the trace,
`kbuild info` and the errors ask, so they agree.

First by its parsed name, as kernels 0.19 accepts and rejects (its `_check_variants`, the reasons
in kbuild's words): backend, platform, Python, torch or tvm-ffi, C++ ABI, CUDA/ROCm version. Then,
when its metadata.json is at hand, by what that records, before anything of it is imported: its
`kernels-minver` against the formats this loader reads, its ABI floor against this host's C
libraries, its GPU archs against this device, its python-depends against this environment.
"""

from __future__ import annotations

from dataclasses import dataclass

from .gpu_arch import Fit, device_fit
from .host_abi import floor_problem
from .metadata import READS_KERNELS, VariantMetadata
from .python_depends import missing
from .variants import Noarch, SystemInfo, Torch, TorchStableAbi, TvmFfi, Universal, Variant, format_compute

METAL_MIN_MACOS = (26, 0)


@dataclass(frozen=True)
class Verdict:
    reason: str | None = None  # why the variant cannot load here; None: it can, as far as is known
    note: str | None = None  # what a check of a fitting variant found worth telling


def judge(variant: Variant | None, system: SystemInfo, meta: VariantMetadata | None = None) -> Verdict:
    """The verdict on `variant` for `system`: by its name, then by its metadata `meta` (None:
    unknown, not checked). `variant` None: a folder the caller named, judged by its metadata only."""
    if variant is not None and (reason := _name_mismatch(variant, system)):
        return Verdict(reason)
    return _recorded(meta, variant, system) if meta is not None else Verdict()


# -- by name ---------------------------------------------------------------------------------------

def _name_mismatch(variant: Variant, system: SystemInfo) -> str | None:
    if isinstance(variant.framework, Universal):
        return None
    if variant.backend == "cpu" and system.cpu_first:
        return _name_mismatch(variant, system.as_cpu())
    if variant.backend and variant.backend != system.backend:  # an SDK's "" is any backend
        return f"built for {variant.backend}, this system uses {system.backend}"
    if isinstance(variant.framework, Noarch):
        if variant.framework.framework == "mlx" and not system.mlx:
            return "an MLX kernel, and MLX is not installed"
        return None
    if reason := _python_mismatch(variant, system):
        return reason
    if variant.cpu is not None and (variant.cpu, variant.os) != (system.cpu, system.os):
        return f"built for {variant.cpu}-{variant.os}, this is {system.cpu}-{system.os}"
    if reason := _framework_mismatch(variant, system):
        return reason
    if variant.backend == "metal" and variant.cpu is not None and system.macos is not None \
            and system.macos < METAL_MIN_MACOS:
        # compiled with -std=metal4.0, which older macOS cannot load (kernels 0.19 refuses it too)
        return (f"compiled Metal code needs macOS {METAL_MIN_MACOS[0]} or later, "
                f"this is macOS {system.macos[0]}.{system.macos[1]}")
    return _compute_mismatch(variant, system)


def _framework_mismatch(variant: Variant, system: SystemInfo) -> str | None:
    """The torch (or tvm-ffi) a compiled variant needs against this one's."""
    framework, have = variant.framework, system.torch
    if not isinstance(framework, (Torch, TorchStableAbi, TvmFfi)):
        return None
    built = framework.version
    if isinstance(framework, TorchStableAbi) and have < built:
        return f"needs torch >= {built[0]}.{built[1]}, this is torch {have[0]}.{have[1]}"
    if isinstance(framework, TvmFfi) and built != system.tvm_ffi:
        tvm = f"tvm-ffi {system.tvm_ffi[0]}.{system.tvm_ffi[1]}" if system.tvm_ffi else "no tvm-ffi installed"
        return f"built for tvm-ffi {built[0]}.{built[1]}, this has {tvm}"
    if isinstance(framework, Torch):
        if built != have:
            return f"built for torch {built[0]}.{built[1]}, this is torch {have[0]}.{have[1]}"
        # an untagged name fits either ABI (kernels 0.19's rule)
        if variant.os == "linux" and variant.cxx11 is not None and variant.cxx11 != system.cxx11:
            return "built for the other C++ ABI"
    return None


def _python_mismatch(variant: Variant, system: SystemInfo) -> str | None:
    """Why this interpreter cannot import the variant's compiled code: `abi3` libraries need a
    Python with the GIL, and `cpython-3.N` is the oldest CPython they import into."""
    minimum = variant.min_python
    if minimum is None:
        return None
    if variant.python_abi == "abi3" and system.free_threaded:
        # built for the limited API (.abi3.so), which a free-threaded Python does not import: the
        # import would fail with "No module named", or worse
        return ("a compiled (.abi3.so) build, which a free-threaded Python cannot import; use a Python with the GIL "
                "(or an abi3t build, Python 3.15+)")
    if system.python < minimum:
        return f"needs Python >= {minimum[0]}.{minimum[1]}, this is Python {system.python[0]}.{system.python[1]}"
    return None


def _compute_mismatch(variant: Variant, system: SystemInfo) -> str | None:
    compute, runtime = variant.compute, system.compute_version
    if compute is None or compute.version is None:
        return None
    built = compute.version
    if runtime is None:
        return f"built for {compute.tag}, this torch has no {variant.backend} version"
    if variant.backend in ("cuda", "rocm"):
        # the same major and a minor at most the runtime's (ROCm too, since kernels 0.18)
        if built[0] != runtime[0] or runtime[1] < built[1]:
            label = {"cuda": "CUDA", "rocm": "ROCm"}[variant.backend]
            return f"built for {label} {built[0]}.{built[1]}, this torch uses {label} {runtime[0]}.{runtime[1]}"
        return None
    if built != runtime:
        return f"built for {compute.tag}, this torch uses {format_compute(variant.backend, runtime)}"
    return None


# -- by its metadata.json --------------------------------------------------------------------------

def _recorded(meta: VariantMetadata, variant: Variant | None, system: SystemInfo) -> Verdict:
    if meta.kernels_minver is not None and meta.kernels_minver > READS_KERNELS:
        # a format newer than this loader knows: another variant may still fit, so a rejection in
        # the trace rather than kernels 0.19's error at import
        return Verdict(f"needs a loader of kernels >= {meta.kernels_minver}'s formats (kernels-minver); this kbuild "
                       f"reads those of kernels {READS_KERNELS}: upgrade kbuild")
    if problem := floor_problem(meta.abi, system.glibc, system.glibcxx):
        return Verdict(problem)
    backend = _backend(meta, variant, system)
    archs = meta.backend.archs if meta.backend else ()
    # a Python-only build has no device code, so no archs to record: nothing to say about it
    # a folder the caller named (no variant name) may hold anything
    compiled = variant is None or not isinstance(variant.framework, (Noarch, Universal))
    device = device_fit(backend, archs, _device_for(backend, system)) if archs or compiled else Fit()
    if device.problem:
        return Verdict(device.problem)
    depends = missing(meta.python_depends, backend) if system.python_env else None
    return Verdict(depends, device.note)


def _backend(meta: VariantMetadata, variant: Variant | None, system: SystemInfo) -> str:
    """The variant's backend: as recorded, else its name's; a universal build's (or a folder the
    caller named) runs on this system's."""
    if meta.backend:
        return meta.backend.type
    return (variant.backend if variant is not None else "") or system.backend


def _device_for(backend: str, system: SystemInfo) -> str | None:
    # a CPU variant chosen on a CUDA torch has no device code to check against its GPU
    return system.gpu_arch if backend == system.backend else None
