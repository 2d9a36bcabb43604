"""This host's C libraries, and whether a variant's recorded ABI floor (metadata.json `abi`) fits.

A variant built on a newer distribution than the user's needs symbol versions the host's glibc
or libstdc++ lacks; dlopen would fail with "version `GLIBC_2.34' not found". The loader asks
first, so a variant with a lower floor, or a clear error, wins.
"""

from __future__ import annotations

import os
import re

_LIBSTDCXX = re.compile(r"/libstdc\+\+\.so\.6\.0\.(\d+)$")
# libstdc++.so.6.0.N defines GLIBCXX_3.4.N (so since GCC 5's 6.0.21; older ones are not seen with
# a torch that runs)
_FIRST_MATCHING = 21


def glibc() -> tuple[int, ...] | None:
    """The running glibc's version, None on another C library (musl) or another OS."""
    try:
        name, version = (os.confstr("CS_GNU_LIBC_VERSION") or "").split()
    except (AttributeError, ValueError, OSError):
        return None
    return _version(version) if name == "glibc" else None


def libstdcxx() -> tuple[int, ...] | None:
    """The GLIBCXX version of the libstdc++ loaded in this process (torch loads it), None when
    none is loaded or its file name does not tell."""
    try:
        with open("/proc/self/maps", encoding="ascii", errors="replace") as maps:
            paths = {line.split()[-1] for line in maps if "libstdc++" in line}
    except OSError:
        return None
    for path in paths:
        if (m := _LIBSTDCXX.search(os.path.realpath(path))) and int(m[1]) >= _FIRST_MATCHING:
            return (3, 4, int(m[1]))
    return None


def floor_problem(abi, host_glibc: tuple[int, ...] | None, host_glibcxx: tuple[int, ...] | None) -> str | None:
    """Why a variant whose metadata records `abi` (kbuild.metadata.AbiFloor, or None) cannot load
    on this host, e.g. "needs glibc 2.34, this system has 2.31"; None when it can, or when
    either side is unknown."""
    if abi is None:
        return None
    problems = []
    if abi.glibc and host_glibc and _version(abi.glibc) > host_glibc:
        problems.append(f"needs glibc {abi.glibc}, this system has {_dotted(host_glibc)}")
    if abi.glibcxx and host_glibcxx and _version(abi.glibcxx) > host_glibcxx:
        problems.append(f"needs libstdc++ GLIBCXX_{abi.glibcxx}, the loaded one has GLIBCXX_{_dotted(host_glibcxx)}")
    return "; ".join(problems) or None


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text))


def _dotted(version: tuple[int, ...]) -> str:
    return ".".join(map(str, version))
