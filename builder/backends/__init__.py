"""Backends: one module each for what kbuild compiles (cpu.py, cuda.py), behind one interface
(base.py), and the table below. The manifest parses more backends (rocm, xpu, metal, ...:
kbuild.variants.BACKENDS); their sections are never compiled. Adding a compiled backend is a
module and a line in _TABLE (tests/integration/test_new_backend.py adds one so).
"""

from __future__ import annotations

from importlib import import_module

from builder.backends.base import Backend, CompileRule, ToolkitRelease, in_range

# The compiled backends, one line each: (the module, the Backend it defines), in the order kbuild names them.
_TABLE = (
    ("builder.backends.cpu", "CPU"),
    ("builder.backends.cuda", "CUDA"),
)
BACKENDS: dict[str, Backend] = {b.name: b for b in (getattr(import_module(m), name) for m, name in _TABLE)}
COMPILED_BACKENDS = tuple(BACKENDS)
# a source suffix -> (its compile rule's name, the backend that owns it), beyond the host C++ compiler's
DEVICE_SOURCES = {suffix: (rule.tool, b) for b in BACKENDS.values() for suffix, rule in b.source_tools.items()}
# each backend's compile rules by name, in the table's order (builder/compile/ninja_file.py writes them)
COMPILE_RULES = {rule.tool: rule for b in BACKENDS.values() for rule in b.source_tools.values()}


def compiled(name: str) -> Backend | None:
    """The backend `name` when kbuild compiles it, else None."""
    return BACKENDS.get(name)


def not_compiled(name: str) -> str:
    """Why a section or variant of a backend kbuild does not compile is skipped."""
    return f"{name} kernels cannot be compiled on this machine (kbuild compiles {' and '.join(COMPILED_BACKENDS)})"


__all__ = ["BACKENDS", "COMPILED_BACKENDS", "COMPILE_RULES", "DEVICE_SOURCES", "Backend", "CompileRule",
           "ToolkitRelease", "compiled", "in_range", "not_compiled"]
