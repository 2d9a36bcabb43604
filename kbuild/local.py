"""`get_local_kernel(path)`: load a kernel straight from a local build (its `build/` folder, the
build folder itself, or one variant folder), with the variant choice of kbuild.loading."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from types import ModuleType

from .hub_loader import get_kernel
from .kernel_deps import KernelPin
from .loading import find_variant, load_variant
from .variants import detect_system


def get_local_kernel(path: str | Path, backend: str | None = None, *, verify: bool = True,
                     check_arch: bool = True) -> ModuleType:
    """Import the best variant of the kernel at `path`: a project or repo folder holding
    `build/<variant>/`, the build folder itself, or one variant folder.

    `backend="cpu"` picks CPU builds in a CUDA-built torch. With `verify`, a variant whose
    metadata.json records a digest is checked against it before anything of it runs.
    `check_arch=False` loads a variant whose recorded GPU archs do not include this GPU's (a
    kernel with, say, a Triton fallback for the others).
    """
    system = detect_system(backend)
    return load_variant(find_variant(path, system if check_arch else replace(system, gpu_arch=None)),
                        verify=verify, load_dependency=lambda pin: _from_hub(pin, backend))


def _from_hub(pin: KernelPin, backend: str | None) -> ModuleType:
    """A dependency of a local kernel: from the default hub (or LOCAL_KERNELS), for the same backend."""
    return get_kernel(pin.repo_id, version=pin.version, revision=pin.revision, backend=backend)
