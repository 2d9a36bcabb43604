"""CUDA capabilities: which exist, the defaults per CUDA version, and their -gencode flags.

An unknown capability is an error, never a silent drop (one of the incumbent's complaints).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Every compute capability some nvcc has accepted; an `a` (arch-specific) or `f`
# (family-specific) suffix is valid on 9.0 and newer.
KNOWN_BASES = (
    "5.0", "5.2", "5.3", "6.0", "6.1", "6.2", "7.0", "7.2", "7.5", "8.0", "8.6", "8.7", "8.8", "8.9",
    "9.0", "10.0", "10.1", "10.3", "11.0", "12.0", "12.1",
)

_DEFAULTS = (
    ((13, 0), "7.5 8.0 8.6 8.7 8.9 9.0 10.0 11.0 12.0 12.1+PTX"),
    ((12, 8), "7.0 7.2 7.5 8.0 8.6 8.7 8.9 9.0 10.0 10.1 12.0+PTX"),
    ((0, 0), "7.0 7.2 7.5 8.0 8.6 8.7 8.9 9.0+PTX"),
)

_CAP_RE = re.compile(r"^(?P<base>\d+\.\d)(?P<suffix>[af]?)(?P<ptx>\+PTX)?\Z")


@dataclass(frozen=True, order=True)
class Capability:
    major: int
    minor: int
    suffix: str = ""  # "", "a" or "f"
    ptx: bool = False

    @property
    def arch(self) -> str:
        """The nvcc spelling without prefix: 90a, 100f, 75."""
        return f"{self.major}{self.minor}{self.suffix}"

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}{self.suffix}" + ("+PTX" if self.ptx else "")

    def gencode_flags(self) -> list[str]:
        flags = [f"-gencode=arch=compute_{self.arch},code=sm_{self.arch}"]
        if self.ptx:
            flags.append(f"-gencode=arch=compute_{self.arch},code=compute_{self.arch}")
        return flags


def parse_capability(text: str) -> Capability:
    """`9.0a+PTX` -> Capability(9, 0, "a", True); ValueError says what is known."""
    m = _CAP_RE.match(text.strip())
    if not m or m["base"] not in KNOWN_BASES or (m["suffix"] and float(m["base"]) < 9.0):
        raise ValueError(f'unknown capability "{text}" (known: {", ".join(KNOWN_BASES)}; '
                         'optional a/f suffix from 9.0, optional +PTX)')
    major, minor = (int(p) for p in m["base"].split("."))
    return Capability(major, minor, m["suffix"], bool(m["ptx"]))


def well_formed_capability(text: str) -> bool:
    """Spelled like a capability (`11.8`, `9.0a+PTX`), known or not."""
    return bool(_CAP_RE.match(text.strip()))


def parse_arch_list(text: str, where: str) -> tuple[Capability, ...]:
    """A TORCH_CUDA_ARCH_LIST-style list: `8.0;9.0a`, `8.0 9.0+PTX` or `8.0,9.0`. ValueError names
    `where` and the bad entry."""
    items = [t for t in re.split(r"[;,\s]+", text) if t]
    if not items:
        raise ValueError(f"{where}: expected capabilities like \"8.0;9.0a\", got {text!r}")
    caps = []
    for item in items:
        try:
            caps.append(parse_capability(item))
        except ValueError as e:
            raise ValueError(f"{where}: {e}") from None
    return tuple(dict.fromkeys(caps))


def restrict(requested: list[Capability], allowed: tuple[Capability, ...] | None,
             explicit: bool) -> list[Capability]:
    """The capabilities of `requested` a build restricted to `allowed` compiles. A section that
    names its own capabilities keeps its spelling of each one `allowed` names by number (9.0a
    for 9.0 stays 9.0a: the code may need the arch-specific features); a section on the defaults
    takes `allowed` as written."""
    if allowed is None:
        return list(requested)
    if not explicit:
        return list(allowed)
    wanted = {(c.major, c.minor) for c in allowed}
    return [c for c in requested if (c.major, c.minor) in wanted]


def default_capabilities(cuda: tuple[int, int]) -> list[Capability]:
    """kernel-builder's default list for a CUDA version (docs/formats.md, "Default CUDA capabilities")."""
    for since, caps in _DEFAULTS:
        if cuda >= since:
            return [parse_capability(c) for c in caps.split()]
    raise AssertionError("unreachable: the last default starts at 0.0")


def parse_supported_archs(list_gpu_arch_output: str) -> frozenset[str]:
    """The base archs (`75`, `90`, …) in `nvcc --list-gpu-arch` output."""
    return frozenset(re.findall(r"compute_(\d+)", list_gpu_arch_output))


def select(requested: list[Capability], supported: frozenset[str]) -> tuple[list[Capability], list[Capability]]:
    """Split the requested capabilities into (what this nvcc compiles, what it cannot)."""
    ok = [c for c in requested if f"{c.major}{c.minor}" in supported]
    return ok, [c for c in requested if c not in ok]
