"""Checks on a linked kernel library before it is staged (its format reads the file:
builder/toolchains/binary/).

A library that would crash or fail to load in torch's process is a build failure with a reason,
not a segfault on a user's GPU later. A library that promises an ABI it does not keep is one too:
a stable-ABI variant may call into torch only through its stable C shim, and every kernel library
is an `.abi3.so` (built with Py_LIMITED_API), so it may use only the limited Python API (the
list comes from abi3info, CPython's stable_abi.toml as data).
"""

from __future__ import annotations

import re
from pathlib import Path

import abi3info
from abi3info.models import Symbol

from builder.toolchains.binary import BinaryFormat, UnreadableLibrary

# Defined only inside libstdc++ itself (locale and iostream set-up), never instantiated from
# headers: a library that defines one carries a private static copy of libstdc++.
_LIBSTDCXX_MARKERS = {"_ZNSt6locale5_ImplC2Em", "_ZNSt6locale7classicEv", "_ZNSt8ios_base4InitC1Ev"}
# A mangled name that involves torch's C++ API (namespaces c10, at, torch, caffe2): its layout and
# symbols change between torch releases, which is what the stable ABI exists to avoid.
_TORCH_CXX = re.compile(r"^_Z.*?(?<![0-9])(3c10|2at|5torch|6caffe2)(?=[0-9])")
_PYTHON = re.compile(r"^_?Py")
_LIMITED = {s.name for s in (*abi3info.FUNCTIONS, *abi3info.DATAS) if isinstance(s, Symbol)}


def library_problems(path: Path, binary: BinaryFormat, stable_abi: bool = False, abi3: bool = True) -> list[str]:
    """What is wrong with the shared library at `path` (empty when nothing is), read as `binary`;
    `stable_abi`: it belongs to a torch stable-ABI variant; `abi3`: it promises the limited Python
    API (every library kbuild stages is an .abi3.so)."""
    try:
        library = binary.library(path)
    except UnreadableLibrary as e:
        return [f"{path.name}: {e.why}"]
    needed, defined, undefined = library.needed, library.defined, [*library.undefined, *library.weak]
    problems = []
    if _LIBSTDCXX_MARKERS & defined and not any(n.startswith("libstdc++.so") for n in needed):
        problems.append(f"{path.name} carries its own static copy of libstdc++ (the C++ compiler linked "
                        "libstdc++.a); torch extensions must share torch's libstdc++.so.6")
    if abi3 and (bad := [s for s in undefined if _PYTHON.match(s) and s not in _LIMITED]):
        problems.append(f"{path.name} uses {_some(bad)}, outside the limited Python API its .abi3 name and "
                        "Py_LIMITED_API promise (pybind11 and CPython internals are not allowed)")
    if stable_abi and (bad := [s for s in undefined if _TORCH_CXX.match(s)]):
        problems.append(f"{path.name} is a stable-ABI variant but uses torch's C++ API: {_some(bad)} (only the "
                        "stable C shim, aoti_torch_* and torch_*, is allowed; include torch/csrc/stable "
                        "headers, not ATen/c10)")
    return problems


def _some(symbols: list[str]) -> str:
    shown = ", ".join(sorted(symbols)[:3])
    return shown + (f" and {len(symbols) - 3} more" if len(symbols) > 3 else "")
