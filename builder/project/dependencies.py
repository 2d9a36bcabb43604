"""The dependencies a `[kernel.*]` section names in `depends`: which names exist, which backend
each belongs to, and what a build of that backend gets from it; and the `python-depends` names a
manifest may declare.

The one owner of dependency names. kernel-builder's names are accepted as they are; a name of a
backend kbuild does not build is never an error (its sections are not compiled), while an unknown
name in a section kbuild compiles is. `cutlass_X_Y` resolves to NVIDIA's CUTLASS headers, which
builder/toolchains/provision.py installs from PyPI's `nvidia-cutlass` (versions.toml lists its releases).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from builder.backends import COMPILED_BACKENDS

# Backends whose sections kbuild compiles (builder/backends/); dependencies of the others are never resolved.
BUILT_BACKENDS = COMPILED_BACKENDS

_CUTLASS = re.compile(r"^cutlass_(\d+)_(\d+)\Z")
# kernel-builder's other dependency names, by what they are to a build.
_BACKEND_ONLY = {"cutlass_sycl": "xpu", "sycl_tla": "xpu", "metal-cpp": "metal"}
_RUNTIME_PYTHON = ("einops", "nvidia-cutlass-dsl")  # Python packages: nothing to compile against
_UNSUPPORTED = {"tvm-ffi": "tvm-ffi kernels are not supported by kbuild yet"}
# Edition 6's shim for kernels written against torch's stable ABI: kbuild compiles them against the
# stable-ABI headers the torch being built against ships (torch/csrc/stable, torch/headeronly),
# which every unit already has, so it needs nothing provisioned (kernel-builder's own package for it
# was not available to compare: an assumption, which the README's build.toml tour states).
STABLE_ABI_SHIM = "torch-stable-abi-shim"
KNOWN = ("torch", "cutlass_X_Y", STABLE_ABI_SHIM, *_BACKEND_ONLY, *_RUNTIME_PYTHON, *_UNSUPPORTED)


@dataclass(frozen=True)
class Dependency:
    name: str
    kind: str  # "torch" | "cutlass" | "python" | "backend-only" | "unsupported"
    version: tuple[int, int] | None = None  # cutlass: the release kernel-builder pins (major, minor)
    note: str = ""

    @property
    def headers(self) -> bool:
        """Whether a build needs this dependency's headers provisioned."""
        return self.kind == "cutlass"


def parse_dependency(name: str) -> Dependency | None:
    """The dependency `name` stands for, or None when kernel-builder knows no such name."""
    if name in ("torch", STABLE_ABI_SHIM):
        return Dependency(name, "torch")
    if m := _CUTLASS.match(name):
        return Dependency(name, "cutlass", (int(m[1]), int(m[2])))
    if name in _BACKEND_ONLY:
        return Dependency(name, "backend-only", note=f"a dependency of {_BACKEND_ONLY[name]} builds")
    if name in _RUNTIME_PYTHON:
        return Dependency(name, "python")
    if name in _UNSUPPORTED:
        return Dependency(name, "unsupported", note=_UNSUPPORTED[name])
    return None


def check_dependency(name: str, backend: str) -> str | None:
    """Why `name` cannot be a dependency of a `backend` section kbuild compiles, or None."""
    dep = parse_dependency(name)
    if dep is None:
        return f'unknown dependency "{name}" (known: {", ".join(KNOWN)})'
    if dep.kind == "backend-only" and _BACKEND_ONLY[name] != backend:
        return f'"{name}" is {dep.note}, not of {backend} builds'
    if dep.kind == "unsupported":
        return f'"{name}": {dep.note}'
    return None


# -- python-depends ------------------------------------------------------------------------------

# kernel-builder's allow-list of `python-depends` (the packages its builds may declare): those of
# [general], and those of a [general.<backend>] table.
PYTHON_GENERAL = ("einops", "helion", "tvm-ffi")
PYTHON_BY_BACKEND = {"cuda": ("nvidia-cutlass-dsl",), "neuron": ("nki",), "xpu": ("onednn",)}


def check_python_dependency(name: str, backend: str | None) -> str | None:
    """Why `name` cannot be a `python-depends` entry of [general] (backend None) or of
    [general.<backend>], or None."""
    if name in PYTHON_GENERAL:
        return None
    if backend is None:
        owner = next((b for b, names in PYTHON_BY_BACKEND.items() if name in names), None)
        if owner:
            return f'"{name}" is a {owner} dependency: list it in [general.{owner}] python-depends'
        return f'unknown Python dependency "{name}" (known: {", ".join(PYTHON_GENERAL)})'
    if name in PYTHON_BY_BACKEND.get(backend, ()):
        return None
    known = PYTHON_GENERAL + PYTHON_BY_BACKEND.get(backend, ())
    return f'unknown Python dependency "{name}" for {backend} (known: {", ".join(known)})'


# -- CUTLASS releases ---------------------------------------------------------------------------


@dataclass(frozen=True)
class CutlassRelease:
    wanted: tuple[int, int]  # what the manifest names (cutlass_4_0 -> 4.0)
    release: str  # the nvidia-cutlass release used, e.g. "4.2.0.0"

    @property
    def name(self) -> str:
        """The toolchain's name: cutlass-4.2."""
        return "cutlass-" + ".".join(self.release.split(".")[:2])

    @property
    def exact(self) -> bool:
        return _two(self.release) == self.wanted

    def warning(self, dependency: str) -> str | None:
        if self.exact:
            return None
        want = f"{self.wanted[0]}.{self.wanted[1]}"
        return (f"{dependency}: nvidia-cutlass {want} is not published on PyPI; using {self.release}, "
                f"the nearest {self.wanted[0]}.x release")


def pick_cutlass(wanted: tuple[int, int], releases: list[str]) -> CutlassRelease | None:
    """The nvidia-cutlass release for CUTLASS `wanted`: exactly that major.minor when published,
    else the nearest release of the same major (the newer one on a tie); None when the major has
    no release at all."""
    same = [r for r in releases if _two(r)[0] == wanted[0]]
    if not same:
        return None
    exact = [r for r in same if _two(r) == wanted]
    if exact:
        return CutlassRelease(wanted, max(exact, key=_key))  # the newest patch of that minor
    # nearest minor; on a tie the newer minor, then the newest patch
    best = min(same, key=lambda r: (abs(_two(r)[1] - wanted[1]), -_two(r)[1], [-p for p in _key(r)]))
    return CutlassRelease(wanted, best)


def cutlass_for(spec: str, releases: list[str]) -> CutlassRelease | None:
    """`cutlass-4.2` / `cutlass-4.2.0.0` (a toolchain spec) -> the release it installs."""
    m = re.fullmatch(r"cutlass-(\d+)\.(\d+)((?:\.\d+)*)", spec)
    if not m:
        return None
    wanted, release = (int(m[1]), int(m[2])), spec.removeprefix("cutlass-")
    if m[3]:  # a full release number: exactly that one
        return CutlassRelease(wanted, release) if release in releases else None
    found = pick_cutlass(wanted, releases)
    return found if found and found.exact else None


def _two(release: str) -> tuple[int, int]:
    major, minor = release.split(".")[:2]
    return int(major), int(minor)


def _key(release: str) -> tuple[int, ...]:
    return tuple(int(p) for p in release.split(".") if p.isdigit())


# Where a missing include comes from: its first path component -> the dependency that has it.
_INCLUDE_OWNERS = {"cutlass": "cutlass_X_Y", "cute": "cutlass_X_Y", "torch": "torch", "ATen": "torch",
                   "c10": "torch"}


def provider_of(include: str) -> str | None:
    """The dependency whose headers hold `include` (`cutlass/gemm/gemm.h` -> cutlass_X_Y), or None."""
    return _INCLUDE_OWNERS.get(include.split("/", 1)[0])
