"""Does a linked kernel library resolve every symbol it leaves undefined? (Its format reads the
files: builder/toolchains/binary/.)

A shared library links even when it calls a function nothing defines (`-shared` allows undefined
symbols); it then fails at `import` with "undefined symbol". This check finds such symbols before
the library is staged: each undefined, non-weak dynamic symbol must be defined by a library it
loads (the libraries it needs and theirs, found as the dynamic loader finds them) or be part of the
Python C API, which the interpreter that imports it provides.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from builder.backends import BACKENDS, Backend
from builder.toolchains.binary import BinaryFormat, Library, UnreadableLibrary

_PYTHON_API = re.compile(r"^_?Py")  # defined by the python executable (abi_check.py checks which)
# libraries only a device's driver installs (each backend's), by link name -> the backend
DRIVER_LIBRARIES: dict[str, Backend] = {lib: b for b in BACKENDS.values() for lib in b.driver_libraries}


@dataclass(frozen=True)
class LinkCheck:
    undefined: tuple[str, ...]  # symbols no loaded library defines, in the library's order
    not_found: tuple[str, ...]  # needed libraries not found here (their symbols were not looked at)


def unresolved_symbols(library: Path, binary: BinaryFormat, search_dirs: list[str],
                       stub_dirs: Sequence[str] = ()) -> LinkCheck:
    """The undefined symbols of `library` (read as `binary`) that nothing it loads defines.
    `search_dirs`: the -L folders it was linked with (torch's, the CUDA runtime's), looked in after
    each library's run path and before the system's; `stub_dirs`: where link stubs of driver
    libraries lie (a machine without a GPU has no libcuda.so.1, but the stub names the same symbols)."""
    lib = binary.library(library)
    left = {s: None for s in lib.undefined if not _PYTHON_API.match(s)}
    queue: list[tuple[str, Library]] = [(n, lib) for n in lib.needed]
    seen, missing = set(), []
    dirs = [*search_dirs, *binary.loader_dirs()]
    while queue and left:
        name, parent = queue.pop(0)  # breadth first, the loader's order
        if name in seen:
            continue
        seen.add(name)
        path = binary.locate(name, [*parent.runpath, *dirs]) or _driver_stub(binary, name, stub_dirs)
        if path is None:
            missing.append(name)
            continue
        try:
            dep = binary.library(path, symbols=False)
            for symbol in binary.exported(path, list(left)):
                del left[symbol]
        except UnreadableLibrary:
            missing.append(name)
            continue
        queue += [(n, dep) for n in dep.needed]
    return LinkCheck(tuple(left), tuple(missing))


def _driver_stub(binary: BinaryFormat, name: str, stub_dirs: Sequence[str]) -> Path | None:
    link_name = binary.link_name(name)
    return binary.locate(link_name, list(stub_dirs)) if link_name in DRIVER_LIBRARIES else None
