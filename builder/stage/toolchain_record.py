"""What a compiled variant was built with, written into its metadata.json as
`provenance.toolchain` (docs/formats.md, "metadata.json") so that anyone can rebuild it and compare:
torch (version, and the digest of the installed wheel's files), nvcc (its exact build, and
whether it came from NVIDIA's wheels or the system), the C++ compiler, the glibc sysroot and
manylinux policy, ninja, the manifest's edition and SOURCE_DATE_EPOCH. Only versions and digests:
no path, user, host, time or job count, so the same toolchain on another machine records the same.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from kbuild_common import proc
from builder.backends import compiled
from builder.compile.ninja_run import ninja_binary
from builder.toolchains.sysroot import Sysroot, compiler_id
from builder.toolchains.toolchain import nvcc_version

TYPE_CHECKING = False
if TYPE_CHECKING:
    from builder.toolchains.toolchain import Toolchain


def toolchain_record(toolchain: Toolchain, backend: str, *, cxx: str, edition: int, source_date_epoch: str,
                     sysroot: Sysroot | None, manylinux: str | None) -> dict:
    """The record for a variant of `backend` compiled with `toolchain` (keys in a fixed order)."""
    torch = toolchain.torch
    record: dict = {"torch": {"version": torch.torch_version, "files-sha256": torch.files_sha256 or None}}
    if toolchain.cuda is not None and compiled(backend) is not None and compiled(backend).needs_toolkit:
        nvcc = Path(toolchain.cuda.nvcc)
        record["nvcc"] = {"version": _nvcc_build(str(nvcc)), "from": _origin(nvcc)}
    record["cxx"] = compiler(cxx)
    record["sysroot"] = {"glibc": sysroot.glibc} if sysroot is not None else None
    record["manylinux"] = manylinux
    record["ninja"] = ninja_version()
    record["edition"] = edition
    record["source-date-epoch"] = source_date_epoch
    return record


@lru_cache(maxsize=None)
def _nvcc_build(nvcc: str) -> str:
    found = nvcc_version(Path(nvcc))
    return found.build or f"{found.cuda[0]}.{found.cuda[1]}"


def _origin(nvcc: Path) -> str:
    """"wheel" for NVIDIA's pip packages (a site-packages/nvidia tree, as kbuild's toolchain store
    installs them), else "system"; never the path itself."""
    parts = nvcc.resolve().parts
    return "wheel" if "site-packages" in parts and "nvidia" in parts else "system"


@lru_cache(maxsize=None)
def compiler(cxx: str) -> str:
    """The C++ compiler as recorded: its `--version` line."""
    return compiler_id(cxx)


@lru_cache(maxsize=None)
def ninja_version() -> str:
    return proc.run([ninja_binary(), "--version"], timeout=60, what="ninja --version").stdout.strip()
