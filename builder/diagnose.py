"""One-line reasons for failed compiles, read from the compiler's output.

A missing header is the commonest failure of a ported kernel-builder project: the line names the
unit, the include, and the `depends` entry that provides it.
"""

from __future__ import annotations

import re
from pathlib import Path

from .dependencies import parse_dependency, provider_of
from .plan import CompileUnit

# gcc and nvcc's front end: `file:line:col: fatal error: cutlass/cutlass.h: No such file or directory`
_MISSING = re.compile(r"(?P<file>[^\s:]+):(?P<line>\d+):(?:\d+:)? (?:fatal )?error: (?P<inc>[^\s:]+): "
                      r"No such file or directory")
# nvcc's own spelling: `file(12): catastrophic error: cannot open source file "cute/tensor.hpp"`
_MISSING_NVCC = re.compile(r"(?P<file>[^\s(]+)\((?P<line>\d+)\): catastrophic error: cannot open source file "
                           r"\"(?P<inc>[^\"]+)\"")


def failure_reason(unit: CompileUnit, output: str, root: Path, graph_dir: Path) -> str:
    """Why compiling `unit` failed: a missing header in one line, else the compiler's first error.
    Paths are shown from the kernel folder `root`; the compiler's are relative to `graph_dir`."""
    where = _relative(unit.source, root, graph_dir)
    m = _MISSING.search(output) or _MISSING_NVCC.search(output)
    if m:
        return f"{where}: {missing_header(unit, m['inc'], _relative(Path(m['file']), root, graph_dir), m['line'])}"
    for line in output.splitlines():
        if re.search(r"\berror\b", line) and not line.startswith(("ninja:", "FAILED:")):
            return f"{where}: {line.strip()[:300]}"
    return f"compiling {where} failed; see the log"


def missing_header(unit: CompileUnit, include: str, file: str, line: str) -> str:
    section = f"[kernel.{unit.section}]" if unit.section else "[torch]"
    text = f"{file}:{line} includes {include}, which no include folder of the unit has"
    provider = provider_of(include)
    if provider is None:
        return text + f" (add its folder to {section} include, or the header to the kernel)"
    has = [d for d in unit.depends if (dep := parse_dependency(d)) and
           (dep.kind == "cutlass" if provider == "cutlass_X_Y" else d == provider)]
    if has:
        return text + f"; {section} depends on {', '.join(has)}, whose headers lack it"
    example = ' (e.g. "cutlass_3_8")' if provider == "cutlass_X_Y" else f' ("{provider}")'
    return text + f"; it comes with {provider}: add it to {section} depends{example}"


def _relative(path: Path, root: Path, graph_dir: Path) -> str:
    try:
        return (graph_dir / path).resolve().relative_to(root.resolve()).as_posix()
    except (ValueError, OSError):
        return str(path)
