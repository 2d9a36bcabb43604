"""The C++ standard a unit compiles with: the one the building torch's headers require (C++17
before torch 2.12, C++20 from 2.12 on, docs/formats.md), and what becomes of a project's own
`-std` flag that asks for an older one.

Compilers take the last `-std` they are given, and a project's flags come after kbuild's, so a
`-std=c++17` in a kernel-builder project's cuda-flags or cxx-flags written for torch 2.11 would
make every unit that includes torch 2.12's headers fail there ("C++20 or later compatible
compiler is required to use PyTorch"). Such a flag is dropped from the units that include torch,
and the planner says so once; units that do not include torch keep it.
"""

from __future__ import annotations

import re

from builder.toolchains.toolchain import TorchInfo

# a standard's -std spelling -> its year (c++1z was C++17's name before it was published, and so on)
_YEARS = {"98": 1998, "03": 2003, "0x": 2011, "11": 2011, "1y": 2014, "14": 2014, "1z": 2017, "17": 2017,
          "2a": 2020, "20": 2020, "2b": 2023, "23": 2023, "2c": 2026, "26": 2026}
_SPELLING = re.compile(r"(?:c|gnu)\+\+(\w\w)")
_JOINED = re.compile(r"--?std=(.+)")
_ALONE = ("-std", "--std")  # nvcc also takes the value as the next argument


def torch_standard(torch: TorchInfo) -> str:
    """The -std flag torch's headers require."""
    return "-std=c++20" if torch.torch >= (2, 12) else "-std=c++17"


def year(standard: str) -> int | None:
    """`c++17` or `gnu++2a` -> its year; None for a spelling this table does not know."""
    found = _SPELLING.fullmatch(standard)
    return _YEARS.get(found[1]) if found else None


def drop_older_standards(flags: list[str], required: str) -> tuple[list[str], list[str]]:
    """`flags` without the -std flags that ask for an older C++ than `required` (a -std=... flag),
    and those dropped, as written (`-std c++17` in two arguments reads as one)."""
    floor = year(required.split("=", 1)[1])
    assert floor is not None, required
    kept: list[str] = []
    dropped: list[str] = []
    i = 0
    while i < len(flags):
        flag = flags[i]
        joined = _JOINED.fullmatch(flag)
        value, width = (joined[1], 1) if joined else \
            (flags[i + 1], 2) if flag in _ALONE and i + 1 < len(flags) else (None, 1)
        asked = year(value) if value is not None else None
        if asked is not None and asked < floor:
            dropped.append(" ".join(flags[i:i + width]))
        else:
            kept += flags[i:i + width]
        i += width
    return kept, dropped
