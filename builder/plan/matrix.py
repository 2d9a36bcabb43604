"""The build matrix: which torch releases and toolkit versions (CUDA's) variants are built for, and
which variants each kernel gets in it, with the toolchain (torch release, toolkit version) each needs.

The versions live in builder/versions.toml (data): [torch] rows, and one table per backend with a
toolkit (`toolkit_table`, builder/backends/), whose versions each torch row lists under the same key;
a workspace's `[workspace.matrix]` picks from them. Pure apart from reading that table.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from builder.backends import BACKENDS, ToolkitRelease, compiled, in_range, not_compiled
from builder.plan.steps import stable_abi
from builder.project.manifest import Manifest
from builder.toolchains.versions import SOURCE, read_table
from kbuild.variants import Compute, Noarch, Platform, Torch, TorchStableAbi, Variant
from kbuild_common.errors import ManifestError

Version = tuple[int, int]
_Release = TypeVar("_Release")  # a table's row: TorchRelease or ToolkitRelease
# backend -> the versions.toml table of its toolkit, which is also its key in a torch row and in [default]
_TOOLKIT_TABLES = {b.name: b.toolkit_table for b in BACKENDS.values() if b.toolkit_table}
_MATRIX_KEYS = ("torch", *_TOOLKIT_TABLES.values())


@dataclass(frozen=True)
class TorchRelease:
    series: Version  # (2, 14)
    version: str  # the exact release its toolchain installs: "2.14.1"
    # backend -> the toolkit versions its variants of this torch are built for: (("cuda", ((13, 0),)),)
    toolkits: tuple[tuple[str, tuple[Version, ...]], ...] = ()
    origin: str = field(default=SOURCE, compare=False)  # the table row it came from: "file:line"

    def __str__(self) -> str:
        return f"torch {self.version}"

    def toolkit_versions(self, backend: str) -> tuple[Version, ...]:
        return dict(self.toolkits).get(backend, ())


@dataclass(frozen=True)
class Target:
    """The toolchain one variant is built with."""

    torch: TorchRelease
    toolkit: ToolkitRelease | None = None  # its backend's, when it has one

    def __str__(self) -> str:
        return f"{self.torch}" + (f" + {self.toolkit}" if self.toolkit else "")


@dataclass(frozen=True)
class Matrix:
    torch: tuple[TorchRelease, ...]  # oldest first
    toolkits: tuple[tuple[str, tuple[ToolkitRelease, ...]], ...] = ()  # backend -> its releases, oldest first

    def releases(self, backend: str) -> tuple[ToolkitRelease, ...]:
        return dict(self.toolkits).get(backend, ())

    def toolkits_for(self, backend: str, release: TorchRelease) -> list[ToolkitRelease]:
        return [t for t in self.releases(backend) if t.version in release.toolkit_versions(backend)]


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


Tables = tuple[dict[Version, TorchRelease], dict[str, dict[Version, ToolkitRelease]], dict]


def load_table(path: Path | None = None) -> Tables:
    """The versions table (kbuild's own, or the one at `path`): torch releases by series, each
    backend's toolkit releases by version, and its [default]."""
    table = read_table(path)  # kbuild's own with the overlay merged over it (path: that file alone)
    data = table.data
    toolkits: dict[str, dict[Version, ToolkitRelease]] = {}
    for backend, name in _TOOLKIT_TABLES.items():
        toolkits[backend] = {}
        for key, body in data.get(name, {}).items():
            v = _version(key, f"{table.origin(name, key)}: [{name}.\"{key}\"]")
            toolkits[backend][v] = BACKENDS[backend].release(v, body, table.origin(name, key))
    torch = {}
    for key, body in data.get("torch", {}).items():
        where = f"{table.origin('torch', key)}: [torch.\"{key}\"]"
        listed = []
        for backend, name in _TOOLKIT_TABLES.items():
            versions = tuple(_version(c, f"{where} {name}") for c in body.get(name, []))
            for c in versions:
                if c not in toolkits[backend]:
                    raise ManifestError(f"{where} {name}: {BACKENDS[backend].toolkit_label} {_dotted(c)} has no "
                                        f"[{name}.\"{_dotted(c)}\"] table")
            listed.append((backend, versions))
        torch[_version(key, where)] = TorchRelease(_version(key, where), body["version"], tuple(listed),
                                                   table.origin("torch", key))
    return torch, toolkits, data.get("default", {})


def select(choice: dict | None = None, where: str = "[workspace.matrix]", path: Path | None = None) -> Matrix:
    """The matrix `choice` ({"torch": [...], "cuda": [...]}) names, each list defaulting to the
    table's [default]; every name must be in the table."""
    torch_table, toolkit_tables, default = load_table(path)
    choice = choice or {}
    for key in choice:
        if key not in _MATRIX_KEYS:
            raise ManifestError(f"{where} {key}: unknown key (expected one of: {', '.join(_MATRIX_KEYS)})")
    torch = _pick("torch", torch_table, choice, default, where)  # first: its errors are said first, as before
    return Matrix(torch, tuple((b, _pick(key, toolkit_tables[b], choice, default, where))
                               for b, key in _TOOLKIT_TABLES.items()))


def _pick(key: str, table: dict[Version, _Release], choice: dict, default: dict, where: str) -> tuple[_Release, ...]:
    """The rows of one axis (torch, or a backend's toolkit) that `choice` names, else [default]'s, else all."""
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
    return tuple(table[v] for v in sorted(set(versions)))


def full_matrix(path: Path | None = None) -> Matrix:
    """Every torch release and toolkit version the table knows (what `--variant` may name)."""
    torch_table, toolkit_tables, _ = load_table(path)
    return Matrix(tuple(torch_table[k] for k in sorted(torch_table)),
                  tuple((b, tuple(t[k] for k in sorted(t))) for b, t in toolkit_tables.items()))


def matrix_variants(m: Manifest, matrix: Matrix) -> tuple[list[MatrixVariant], list[MatrixSkip]]:
    """Every variant of the kernel in `matrix`, with the toolchain each is built with."""
    if m.noarch is not None:
        return [MatrixVariant(Variant(framework=Noarch(), compute=Compute(b)), None) for b in m.backends], []
    out, skips = [], []
    for backend in m.backends:
        if compiled(backend) is None:
            skips.append(MatrixSkip(backend, not_compiled(backend)))
            continue
        abi = stable_abi(m, backend)
        found = _stable(m, backend, matrix, abi) if abi else _classic(m, backend, matrix)
        if not found:
            skips.append(MatrixSkip(backend, _why_none(m, backend, matrix)))
        out += found
    return out, skips


def _classic(m: Manifest, backend: str, matrix: Matrix) -> list[MatrixVariant]:
    assert m.torch is not None  # a kernel without [torch-noarch] has [torch] (the manifest readers see to it)
    out = []
    for release in matrix.torch:
        if not in_range(release.series, m.torch.minver, m.torch.maxver):
            continue
        for toolkit in BACKENDS[backend].matrix_toolkits(m, matrix, release):
            compute = toolkit.version if toolkit else None
            out.append(MatrixVariant(_compiled(backend, release.series, compute), Target(release, toolkit)))
    return out


def _stable(m: Manifest, backend: str, matrix: Matrix, abi: Version) -> list[MatrixVariant]:
    # One variant per toolkit version (or one cpu variant), built against the newest torch that
    # has the ABI (the stable ABI `backend` is built for): its headers know every stable API up to it.
    assert m.torch is not None  # [torch] stable-abi is a [torch] key
    newest = [r for r in matrix.torch if r.series >= abi and in_range(r.series, m.torch.minver, m.torch.maxver)]
    if not newest:
        return []
    release = newest[-1]
    return [MatrixVariant(Variant(framework=TorchStableAbi(abi), compute=Compute(backend, t.version if t else None),
                                  platform=Platform.host()),
                          Target(release, t)) for t in BACKENDS[backend].matrix_toolkits(m, matrix, release)]


def _compiled(backend: str, series: Version, compute: Version | None) -> Variant:
    return Variant(framework=Torch(series, cxx11=True), compute=Compute(backend, compute), platform=Platform.host())


def _why_none(m: Manifest, backend: str, matrix: Matrix) -> str:
    torches = ", ".join(r.version for r in matrix.torch) or "none"
    why = BACKENDS[backend].why_no_matrix_variant(m, matrix)
    if why:
        return why
    abi = stable_abi(m, backend)
    if abi:
        return (f"no torch of the matrix ({torches}) is >= the stable ABI {_dotted(abi)} "
                "and inside [torch] minver/maxver")
    return f"no torch of the matrix ({torches}) is inside [torch] minver/maxver"


def variant_archs(m: Manifest, toolkit: ToolkitRelease) -> list[str]:
    """The device archs a variant built with `toolkit` compiles for (what metadata will list): its
    backend's rule (CUDA: each section's capabilities, else the defaults, kept to what that nvcc supports)."""
    return BACKENDS[toolkit.backend].variant_archs(m, toolkit)
