"""Backends: one module each for what kbuild compiles (cpu.py, cuda.py), behind one interface
(base.py), and the table below. The manifest parses more backends (rocm, xpu, metal, ...:
kbuild.variants.BACKENDS); their sections are never compiled. Adding a compiled backend is a
module and a line in BACKENDS.
"""

from __future__ import annotations

from builder.backends.base import Backend, in_range
from builder.backends.cpu import CPU
from builder.backends.cuda import CUDA

BACKENDS: dict[str, Backend] = {b.name: b for b in (CPU, CUDA)}
COMPILED_BACKENDS = tuple(BACKENDS)
# a source suffix -> (its compile rule, the backend that owns it), beyond the host C++ compiler's
DEVICE_SOURCES = {suffix: (tool, b) for b in BACKENDS.values() for suffix, tool in b.source_tools.items()}


def compiled(name: str) -> Backend | None:
    """The backend `name` when kbuild compiles it, else None."""
    return BACKENDS.get(name)


def not_compiled(name: str) -> str:
    """Why a section or variant of a backend kbuild does not compile is skipped."""
    return f"{name} kernels cannot be compiled on this machine (kbuild compiles {' and '.join(COMPILED_BACKENDS)})"


__all__ = ["BACKENDS", "COMPILED_BACKENDS", "DEVICE_SOURCES", "Backend", "compiled", "in_range", "not_compiled"]
