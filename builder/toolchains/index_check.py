"""`kbuild toolchain check-index`: which torch releases the package index has that the versions
table (kbuild's own with its overlay) lacks, each with the rows to add — its CUDA read from the
wheel's metadata (`cuda-toolkit==X.Y.Z` or `nvidia-cuda-runtime-cuNN==X.Y.Z` among its
requirements) — and writing them into the overlay table, atomically.

A series the table has counts as lacking when the index has a newer patch release of it; series
older than the table's oldest are not kbuild's concern. Pre-releases and yanked files are left out.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import tomlkit
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from builder.config.cascade import Setting
from builder.toolchains.package_index import IndexFile, PackageIndex, requires_dist
from builder.toolchains.versions import VersionsTable, read_table
from kbuild_common.errors import UsageError

TOOLKIT = "cuda-toolkit[nvcc,cccl]=={cuda}.*"  # as builder/versions.toml's [cuda] rows install nvcc
_CUDA_RUNTIME = re.compile(r"nvidia-cuda-runtime(-cu\d+)?")


@dataclass(frozen=True)
class Lacking:
    series: str  # "2.15"
    release: str  # the index's newest release of it: "2.15.0"
    cuda: tuple[str, ...]  # the CUDA versions its row lists: the wheel's (and, for a newer patch, the table's)
    wheel: str  # the wheel whose metadata named its CUDA ("" when none was read)
    wheel_cuda: tuple[str, ...]  # what that wheel requires
    table_release: str | None  # the table's release of the series (None: the series is new)
    new_cuda: tuple[str, ...]  # CUDA versions the table has no [cuda] row for

    def describe(self) -> str:
        what = (f"torch {self.release} (the table installs {self.table_release})" if self.table_release
                else f"torch {self.release}")
        cuda = ", ".join(self.wheel_cuda) or "none (a CPU build)"
        return f"{what}: its wheel requires CUDA {cuda} ({self.wheel})"


def torch_cuda(requirements: list[str]) -> tuple[str, ...]:
    """The CUDA versions (X.Y) a torch wheel's requirements pin: cuda-toolkit==13.2.2 (torch 2.13+),
    nvidia-cuda-runtime-cu12==12.8.90 (before)."""
    found = set()
    for text in requirements:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        name = canonicalize_name(req.name)
        if name != "cuda-toolkit" and not _CUDA_RUNTIME.fullmatch(name):
            continue
        for spec in req.specifier:
            if spec.operator in ("==", "===", "~=", ">="):
                parts = spec.version.rstrip(".*").split(".")
                if len(parts) >= 2 and parts[0].isdigit() and parts[1].isdigit():
                    found.add(f"{int(parts[0])}.{int(parts[1])}")
    return tuple(sorted(found, key=Version))


def lacking(index: PackageIndex, table: VersionsTable, python: tuple[int, int] = sys.version_info[:2],
            platform: str = "manylinux") -> list[Lacking]:
    """What the table lacks of the index's torch releases, oldest first."""
    rows = table.data.get("torch", {})
    oldest = min((Version(k) for k in rows), default=Version("0.0"))
    newest: dict[tuple[int, int], list[IndexFile]] = {}
    for f in index.files("torch"):
        v = f.version
        if v.is_prerelease or v.is_devrelease or v.local or Version(f"{v.major}.{v.minor}") < oldest:
            continue
        if not any(platform in t and t.endswith("x86_64") for t in f.tags):
            continue
        have = newest.get((v.major, v.minor))
        if have is None or v > have[0].version:
            newest[(v.major, v.minor)] = [f]
        elif v == have[0].version:
            have.append(f)
    out = []
    for (major, minor), files in sorted(newest.items()):
        series, release = f"{major}.{minor}", str(files[0].version)
        row = rows.get(series)
        if row is not None and Version(row["version"]) >= files[0].version:
            continue
        wheel = _pick(files, python, platform)
        wheel_cuda = torch_cuda(requires_dist(index.metadata(wheel)))
        cuda = tuple(sorted(set(wheel_cuda) | set(row["cuda"] if row else ()), key=Version))
        new_cuda = tuple(c for c in cuda if c not in table.data.get("cuda", {}))
        table_release = row["version"] if row else None
        out.append(Lacking(series, release, cuda, wheel.filename, wheel_cuda, table_release, new_cuda))
    return out


def _pick(files: list[IndexFile], python: tuple[int, int], platform: str) -> IndexFile:
    """The Linux x86_64 wheel for this CPython when there is one, else the first Linux x86_64 one."""
    tag = f"cp{python[0]}{python[1]}"
    linux = [f for f in files if any(platform in t and t.endswith("x86_64") for t in f.tags)]
    return next((f for f in linux if any(t.startswith(f"{tag}-{tag}-") for t in f.tags)), linux[0])


def rows_text(found: list[Lacking], table: VersionsTable) -> str:
    """The TOML rows to add, as an overlay (or builder/versions.toml) takes them."""
    out = []
    for item in found:
        cuda = ", ".join(f'"{c}"' for c in item.cuda)
        note = f"  # {item.wheel} requires CUDA {', '.join(item.wheel_cuda) or 'none'}" if item.wheel else ""
        out.append(f'[torch."{item.series}"]\nversion = "{item.release}"\ncuda = [{cuda}]{note}\n')
    for cuda in sorted({c for item in found for c in item.new_cuda}, key=Version):
        model, archs = _nearest_cuda(table, cuda)
        listed = ", ".join(f'"{a}"' for a in archs)
        out.append(f'[cuda."{cuda}"]\ntoolkit = "{TOOLKIT.format(cuda=cuda)}"\n'
                   f"archs = [{listed}]  # CUDA {model}'s: check `nvcc --list-gpu-arch` of CUDA {cuda}\n")
    return "\n".join(out)


def _nearest_cuda(table: VersionsTable, cuda: str) -> tuple[str, list[str]]:
    known = table.data.get("cuda", {})
    if not known:
        return "none", []
    model = max(known, key=Version)
    return model, list(known[model].get("archs", []))


def write_overlay(path: Path, found: list[Lacking], table: VersionsTable, origin: str) -> None:
    """Add (or replace) the rows in the overlay at `path`, keeping what else it holds; written to a
    temporary file beside it, checked as a versions table, then moved into place."""
    try:
        old = path.read_text(encoding="utf-8") if path.exists() else ""
        doc = tomlkit.parse(old)
    except (OSError, UnicodeDecodeError, tomlkit.exceptions.TOMLKitError) as e:
        raise UsageError(f"{origin}: {path}: cannot read it as TOML ({e}); fix or move it first") from None
    new = tomlkit.parse(rows_text(found, table))
    for kind in ("torch", "cuda"):
        if kind not in new:
            continue
        if kind not in doc:
            doc.add(kind, tomlkit.table(is_super_table=True))
        for key, body in new[kind].items():
            doc[kind][key] = body
    text = tomlkit.dumps(doc)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        read_table(overlay=Setting(Path(tmp), origin))  # the merged table must read back
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
