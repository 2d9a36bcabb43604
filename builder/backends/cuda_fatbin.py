"""The CUDA code a linked library carries: each entry of its `.nv_fatbin` section (which the
library's binary format reads, builder/toolchains/binary/), a cubin (machine code for one GPU
arch) or PTX (for the driver to compile), with its arch.

nvcc's fatbin container is undocumented; its layout is read as nvcc 13.0 writes it (checked here
against `-gencode` flags, tests/integration/test_check_abi.py): containers of a 16-byte header
(magic 0xBA55ED50, version u16, header size u16, payload size u64), each holding entries whose
header starts kind u16 (1 PTX, 2 cubin), u16, header size u32, payload size u64, and carries at
offset 28 the arch as a number (90, 100, 121) and at offset 40 flags, in which 0x100000 marks an
arch-specific ("a") and 0x200000 a family ("f") build.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

SECTION = ".nv_fatbin"
_MAGIC = 0xBA55ED50
_CONTAINER = struct.Struct("<IHHQ")
_ENTRY = struct.Struct("<HHIQ")
_KINDS = {1: "ptx", 2: "cubin"}
_ARCH_SPECIFIC, _FAMILY = 0x100000, 0x200000


@dataclass(frozen=True, order=True)
class FatbinEntry:
    arch: str  # as build.toml spells it: "9.0a", "10.0f", "8.0"
    kind: str  # "cubin" or "ptx"


def fatbin_entries(data: bytes) -> list[FatbinEntry]:
    """Every distinct (arch, kind) in the fatbins of a `.nv_fatbin` section's `data`, sorted; empty
    for a library without CUDA code."""
    return sorted(set(_entries(data)), key=lambda e: (_number(e.arch), e.arch, e.kind))


def _entries(data: bytes):
    offset = 0
    while offset + _CONTAINER.size <= len(data):
        magic, _, header, size = _CONTAINER.unpack_from(data, offset)
        if magic != _MAGIC:
            offset += 8  # containers of several units lie 8-byte aligned, padded between
            continue
        entry, end = offset + header, offset + header + size
        while entry + 48 <= end:
            kind, _, entry_header, payload = _ENTRY.unpack_from(data, entry)
            if entry_header == 0:
                break
            arch, = struct.unpack_from("<I", data, entry + 28)
            flags, = struct.unpack_from("<Q", data, entry + 40)
            if kind in _KINDS:
                yield FatbinEntry(_spell(arch, flags), _KINDS[kind])
            entry += entry_header + payload
        offset = end


def _spell(arch: int, flags: int) -> str:
    suffix = "a" if flags & _ARCH_SPECIFIC else "f" if flags & _FAMILY else ""
    return f"{arch // 10}.{arch % 10}{suffix}"


def _number(arch: str) -> tuple[int, int]:
    major, minor = arch.rstrip("af").split(".")
    return int(major), int(minor)

