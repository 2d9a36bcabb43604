"""Backends: one module each for what kbuild compiles (cpu.py, cuda.py), behind one interface
(base.py), and the table below. The manifest parses more backends (rocm, xpu, metal, ...:
kbuild.variants.BACKENDS); their sections are never compiled. Adding a compiled backend is a
module and a line in _TABLE (tests/integration/test_new_backend.py adds one so).
"""

from __future__ import annotations

from importlib import import_module

from builder.backends.base import Backend, ToolkitRelease, in_range

# The compiled backends, one line each: (the module, the Backend it defines), in the order kbuild names them.
_TABLE = (
    ("builder.backends.cpu", "CPU"),
    ("builder.backends.cuda", "CUDA"),
)
BACKENDS: dict[str, Backend] = {b.name: b for b in (getattr(import_module(m), name) for m, name in _TABLE)}
COMPILED_BACKENDS = tuple(BACKENDS)
# a source suffix -> (its compile rule, the backend that owns it), beyond the host C++ compiler's
DEVICE_SOURCES = {suffix: (tool, b) for b in BACKENDS.values() for suffix, tool in b.source_tools.items()}


def compiled(name: str) -> Backend | None:
    """The backend `name` when kbuild compiles it, else None."""
    return BACKENDS.get(name)


def not_compiled(name: str) -> str:
    """Why a section or variant of a backend kbuild does not compile is skipped."""
    return f"{name} kernels cannot be compiled on this machine (kbuild compiles {' and '.join(COMPILED_BACKENDS)})"


__all__ = ["BACKENDS", "COMPILED_BACKENDS", "DEVICE_SOURCES", "Backend", "ToolkitRelease", "compiled", "in_range",
           "not_compiled"]
