"""The build matrix: which torch releases and CUDA versions variants are built for, and which
variants each kernel gets in it, with the toolchain (torch release, CUDA version) each needs.

The versions live in builder/versions.toml (data); a workspace's `[workspace.matrix]` picks
from it. Pure apart from reading that table.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from kbuild.variants import COMPILED, NOARCH, STABLE_ABI, Variant, host_cpu, host_os

from builder.backends import compiled, in_range, not_compiled
from builder.backends.cuda_arch import default_capabilities
from builder.backends.cuda_arch import select as select_archs
from kbuild_common.errors import ManifestError
from builder.project.manifest import Manifest
from builder.plan.steps import stable_abi
from builder.toolchains.versions import SOURCE, read_table

_MATRIX_KEYS = ("torch", "cuda")

Version = tuple[int, int]


@dataclass(frozen=True)
class TorchRelease:
    series: Version  # (2, 14)
    version: str  # the exact release its toolchain installs: "2.14.1"
    cuda: tuple[Version, ...]  # CUDA versions its variants are built for
    origin: str = field(default=SOURCE, compare=False)  # the table row it came from: "file:line"

    def __str__(self) -> str:
        return f"torch {self.version}"


@dataclass(frozen=True)
class CudaRelease:
    version: Version
    toolkit: str  # pip requirement that provides nvcc
    archs: frozenset[str]  # what its nvcc compiles for: "75", "90", …
    origin: str = field(default=SOURCE, compare=False)  # the table row it came from: "file:line"

    def __str__(self) -> str:
        return f"CUDA {_dotted(self.version)}"


@dataclass(frozen=True)
class Target:
    """The toolchain one variant is built with."""

    torch: TorchRelease
    cuda: CudaRelease | None = None

    def __str__(self) -> str:
        return f"{self.torch}" + (f" + {self.cuda}" if self.cuda else "")


@dataclass(frozen=True)
class Matrix:
    torch: tuple[TorchRelease, ...]  # oldest first
    cuda: tuple[CudaRelease, ...]

    def cuda_for(self, release: TorchRelease) -> list[CudaRelease]:
        return [c for c in self.cuda if c.version in release.cuda]


@dataclass(frozen=True)
class MatrixVariant:
    variant: Variant
    target: Target | None  # None: Python only, no toolchain


@dataclass(frozen=True)
class MatrixSkip:
    backend: str
    reason: str


def _dotted(v: Version) -> str:
    return f"{v[0]}.{v[1]}"


def _version(text: str, where: str) -> Version:
    parts = str(text).split(".")
    if len(parts) < 2 or not all(p.isdigit() for p in parts[:2]):
        raise ManifestError(f'{where}: expected a version like "2.14", got {text!r}')
    return int(parts[0]), int(parts[1])


def load_table(path: Path | None = None) -> tuple[dict[Version, TorchRelease], dict[Version, CudaRelease], dict]:
    """The versions table (kbuild's own, or the one at `path`): torch releases and CUDA versions by
    series, and its [default]."""
    table = read_table(path)  # kbuild's own with the overlay merged over it (path: that file alone)
    data = table.data
    cuda = {}
    for key, body in data.get("cuda", {}).items():
        v = _version(key, f"{table.origin('cuda', key)}: [cuda.\"{key}\"]")
        archs = frozenset(a.replace(".", "") for a in body["archs"])
        cuda[v] = CudaRelease(v, body["toolkit"], archs, table.origin("cuda", key))
    torch = {}
    for key, body in data.get("torch", {}).items():
        where = f"{table.origin('torch', key)}: [torch.\"{key}\"]"
        cudas = tuple(_version(c, f"{where} cuda") for c in body.get("cuda", []))
        for c in cudas:
            if c not in cuda:
                raise ManifestError(f"{where} cuda: CUDA {_dotted(c)} has no [cuda.\"{_dotted(c)}\"] table")
        torch[_version(key, where)] = TorchRelease(_version(key, where), body["version"], cudas,
                                                   table.origin("torch", key))
    return torch, cuda, data.get("default", {})


def select(choice: dict | None = None, where: str = "[workspace.matrix]", path: Path | None = None) -> Matrix:
    """The matrix `choice` ({"torch": [...], "cuda": [...]}) names, each list defaulting to the
    table's [default]; every name must be in the table."""
    torch_table, cuda_table, default = load_table(path)
    choice = choice or {}
    for key in choice:
        if key not in _MATRIX_KEYS:
            raise ManifestError(f"{where} {key}: unknown key (expected one of: {', '.join(_MATRIX_KEYS)})")
    picked = {}
    for key, table in (("torch", torch_table), ("cuda", cuda_table)):
        names = choice.get(key, default.get(key, [_dotted(v) for v in table]))
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise ManifestError(f'{where} {key}: expected a list of versions like ["2.14"], got {names!r}')
        versions = []
        for name in names:
            v = _version(name, f"{where} {key}")
            if v not in table:
                known = ", ".join(_dotted(k) for k in sorted(table))
                raise ManifestError(f'{where} {key}: {key} "{name}" is not in builder/versions.toml (known: {known})')
            versions.append(v)
        picked[key] = [table[v] for v in sorted(set(versions))]
    return Matrix(tuple(picked["torch"]), tuple(picked["cuda"]))


def full_matrix(path: Path | None = None) -> Matrix:
    """Every release and CUDA version the table knows (what `--variant` may name)."""
    torch_table, cuda_table, _ = load_table(path)
    return Matrix(tuple(torch_table[k] for k in sorted(torch_table)), tuple(cuda_table[k] for k in sorted(cuda_table)))


def matrix_variants(m: Manifest, matrix: Matrix) -> tuple[list[MatrixVariant], list[MatrixSkip]]:
    """Every variant of the kernel in `matrix`, with the toolchain each is built with."""
    if m.noarch is not None:
        return [MatrixVariant(Variant(NOARCH, b), None) for b in m.backends], []
    out, skips = [], []
    for backend in m.backends:
        if compiled(backend) is None:
            skips.append(MatrixSkip(backend, not_compiled(backend)))
            continue
        found = _stable(m, backend, matrix) if stable_abi(m, backend) else _classic(m, backend, matrix)
        if not found:
            skips.append(MatrixSkip(backend, _why_none(m, backend, matrix)))
        out += found
    return out, skips


def _classic(m: Manifest, backend: str, matrix: Matrix) -> list[MatrixVariant]:
    out = []
    for release in matrix.torch:
        if not in_range(release.series, m.torch.minver, m.torch.maxver):
            continue
        for toolkit in compiled(backend).matrix_toolkits(m, matrix, release):
            compute = toolkit.version if toolkit else None
            out.append(MatrixVariant(_compiled(backend, release.series, compute), Target(release, toolkit)))
    return out


def _stable(m: Manifest, backend: str, matrix: Matrix) -> list[MatrixVariant]:
    # One variant per CUDA version (or one cpu variant), built against the newest torch that
    # has the ABI: its headers know every stable API up to it.
    abi = stable_abi(m, backend)
    newest = [r for r in matrix.torch if r.series >= abi and in_range(r.series, m.torch.minver, m.torch.maxver)]
    if not newest:
        return []
    release = newest[-1]
    return [MatrixVariant(Variant(STABLE_ABI, backend, abi, t.version if t else None, host_cpu(), host_os()),
                          Target(release, t)) for t in compiled(backend).matrix_toolkits(m, matrix, release)]


def _compiled(backend: str, series: Version, cuda: Version | None) -> Variant:
    return Variant(COMPILED, backend, series, cuda, host_cpu(), host_os(), True)


def _why_none(m: Manifest, backend: str, matrix: Matrix) -> str:
    torches = ", ".join(r.version for r in matrix.torch) or "none"
    why = compiled(backend).why_no_matrix_variant(m, matrix)
    if why:
        return why
    abi = stable_abi(m, backend)
    if abi:
        return f"no torch of the matrix ({torches}) is >= the stable ABI {_dotted(abi)} and inside [torch] minver/maxver"
    return f"no torch of the matrix ({torches}) is inside [torch] minver/maxver"


def variant_archs(m: Manifest, cuda: CudaRelease) -> list[str]:
    """The capabilities a CUDA variant compiles for with `cuda`'s nvcc (what metadata will list):
    each section's list, else the default list, kept to what that nvcc supports."""
    requested = set()
    for section in m.kernels_for("cuda"):
        if any(s.endswith(".cu") for s in section.src):
            requested |= set(section.cuda_capabilities or default_capabilities(cuda.version))
    if not requested and any(s.endswith(".cu") for s in m.torch.src):
        requested = set(default_capabilities(cuda.version))
    ok, _ = select_archs(sorted(requested), cuda.archs)
    return [str(c) for c in sorted(ok)]
