"""One-line reasons for failed compiles, read from the compiler's output.

A missing header is the commonest failure of a ported kernel-builder project: the line names the
unit, the include, and the `depends` entry that provides it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from builder.plan.steps import CompileUnit
from builder.project.dependencies import parse_dependency, provider_of

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
    lines = first_error(output, graph_dir, limit=1)
    if lines:
        return f"{where}: {lines[0].strip()[:300]}"
    return f"compiling {where} failed; see the log"


# a diagnostic's location: gcc `path:12:5:`, nvcc `path(12):`
_LOCATION = re.compile(r"^(?P<path>[^\s:()]+)(?::\d+)+:|^(?P<nvpath>[^\s:()]+)\(\d+\):")


def first_error(output: str, graph_dir: Path, limit: int = 6) -> list[str]:
    """The compiler's first error and the lines that go with it (the source line, the caret, its
    notes), at most `limit`, with every path it names made relative to the current directory,
    so a terminal or editor can open it. Compilers run in `graph_dir` and name files from there."""
    lines = output.splitlines()
    start = next((i for i, line in enumerate(lines)
                  if re.search(r"\berror\b", line) and not line.startswith(("ninja:", "FAILED:"))), None)
    if start is None:
        return []
    found = [clickable(lines[start], graph_dir)]
    for line in lines[start + 1:]:
        if len(found) >= limit or line.startswith(("ninja:", "FAILED:")) or not line.strip():
            break
        if _LOCATION.match(line) and re.search(r"\b(error|warning)\b", line):
            break  # the next diagnostic: the first one is enough
        found.append(clickable(line, graph_dir))
    return found


def clickable(line: str, graph_dir: Path) -> str:
    """`line` with its leading location's path (relative to `graph_dir`, or absolute) rewritten
    relative to the current directory; lines naming no existing file stay as they are."""
    m = _LOCATION.match(line)
    if not m:
        return line
    name = m["path"] or m["nvpath"]
    path = graph_dir / name
    if not path.is_file():
        return line
    shown = os.path.relpath(path.resolve(), Path.cwd())
    if shown.startswith(os.pardir + os.sep + os.pardir + os.sep):
        shown = str(path.resolve())  # far from here: the absolute path reads better
    return shown + line[len(name):]


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
