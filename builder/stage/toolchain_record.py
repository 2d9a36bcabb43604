"""What a compiled variant was built with, written into its metadata.json as
`provenance.toolchain` (docs/formats.md, "metadata.json") so that anyone can rebuild it and compare:
torch (version, and the digest of the installed wheel's files), the backend's toolkit (its own
record, builder/backends/: nvcc's exact build, and whether it came from NVIDIA's wheels or the
system), the C++ compiler, the glibc sysroot and manylinux policy, ninja, the manifest's edition and
SOURCE_DATE_EPOCH. Only versions and digests: no path, user, host, time or job count, so the same toolchain on
another machine records the same.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

from builder.backends import BACKENDS
from builder.compile.ninja_run import ninja_binary
from builder.toolchains.sysroot import Sysroot, compiler_id
from kbuild_common import proc

if TYPE_CHECKING:
    from builder.toolchains.toolchain import Toolchain


def toolchain_record(toolchain: Toolchain, backend: str, *, cxx: str, edition: int, source_date_epoch: str,
                     sysroot: Sysroot | None, manylinux: str | None) -> dict:
    """The record for a variant of `backend` compiled with `toolchain` (keys in a fixed order)."""
    torch = toolchain.torch
    assert torch is not None  # it compiled the variant
    record: dict = {"torch": {"version": torch.torch_version, "files-sha256": torch.files_sha256 or None}}
    if (toolkit := toolchain.toolkits.get(backend)) is not None:
        record.update(BACKENDS[backend].toolkit_record(toolkit))  # the backend's own: nvcc for CUDA
    record["cxx"] = compiler(cxx)
    record["sysroot"] = {"glibc": sysroot.glibc} if sysroot is not None else None
    record["manylinux"] = manylinux
    record["ninja"] = ninja_version()
    record["edition"] = edition
    record["source-date-epoch"] = source_date_epoch
    return record


@cache
def compiler(cxx: str) -> str:
    """The C++ compiler as recorded: its `--version` line."""
    return compiler_id(cxx)


@cache
def ninja_version() -> str:
    return proc.run([ninja_binary(), "--version"], timeout=60, what="ninja --version").stdout.strip()
