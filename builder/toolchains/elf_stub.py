"""Link-time stand-ins for shared libraries: a stub keeps a real library's soname and those of its
versioned symbols a filter allows (e.g. the GLIBCXX versions a manylinux policy allows), with no
code behind them. Linking against the stub binds references to those versions only; whatever else
is needed must come from somewhere else (a static archive) or the link says so.

This is how manylinux toolchains build against an old libstdc++ with a newer compiler (Red Hat's
devtoolset links libstdc++.so.6 of the system plus a `libstdc++_nonshared.a`); zig makes its glibc
stubs the same way, from symbol lists.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile
from elftools.elf.gnuversions import GNUVerDefSection, GNUVerSymSection

from kbuild_common import proc
from kbuild_common.errors import ToolchainError


@dataclass(frozen=True)
class Export:
    name: str
    version: str  # e.g. "GLIBCXX_3.4.21"
    default: bool  # name@@version (what new links bind to) rather than name@version
    kind: str  # "func" | "object" | "tls"
    size: int
    weak: bool


def exports(path: Path) -> tuple[str, list[Export]]:
    """The soname and the versioned symbols `path` defines."""
    try:
        with path.open("rb") as f:
            elf = ELFFile(f)
            dynamic = elf.get_section_by_name(".dynamic")
            soname = next((t.soname for t in dynamic.iter_tags() if t.entry.d_tag == "DT_SONAME"), path.name)
            verdef = next((s for s in elf.iter_sections() if isinstance(s, GNUVerDefSection)), None)
            versym = next((s for s in elf.iter_sections() if isinstance(s, GNUVerSymSection)), None)
            if verdef is None or versym is None:
                raise ToolchainError(f"{path}: defines no symbol versions; nothing to make a versioned stub of")
            names = {v.entry["vd_ndx"]: next(aux).name for v, aux in verdef.iter_versions()}
            found = []
            for i, sym in enumerate(elf.get_section_by_name(".dynsym").iter_symbols()):
                if sym["st_shndx"] == "SHN_UNDEF" or not sym.name or sym["st_info"]["bind"] == "STB_LOCAL":
                    continue
                ndx = versym.get_symbol(i)["ndx"]
                ndx = ndx if isinstance(ndx, int) else {"VER_NDX_GLOBAL": 1, "VER_NDX_LOCAL": 0}.get(ndx, 0)
                version = names.get(ndx & 0x7FFF)
                if not version or version == soname or sym.name == version:
                    continue  # the base version names the file; a version's own symbol the linker makes
                kind = {"STT_OBJECT": "object", "STT_TLS": "tls"}.get(sym["st_info"]["type"], "func")
                found.append(Export(sym.name, version, not ndx & 0x8000, kind, sym["st_size"],
                                    sym["st_info"]["bind"] == "STB_WEAK"))
            return soname, found
    except (OSError, ELFError) as e:
        raise ToolchainError(f"{path}: not a readable ELF shared library ({e})") from None


def unversioned_imports(path: Path) -> set[str]:
    """The names `path` imports without a symbol version (the linker found no versioned definition)."""
    try:
        with path.open("rb") as f:
            elf = ELFFile(f)
            versym = next((s for s in elf.iter_sections() if isinstance(s, GNUVerSymSection)), None)
            found = set()
            for i, sym in enumerate(elf.get_section_by_name(".dynsym").iter_symbols()):
                if sym["st_shndx"] != "SHN_UNDEF" or not sym.name:
                    continue
                ndx = versym.get_symbol(i)["ndx"] if versym is not None else "VER_NDX_GLOBAL"
                if ndx in ("VER_NDX_LOCAL", "VER_NDX_GLOBAL", 0, 1):
                    found.add(sym.name)
            return found
    except (OSError, ELFError) as e:
        raise ToolchainError(f"{path}: not a readable ELF shared library ({e})") from None


def write_stub(real: Path, dest: Path, keep: Callable[[str], bool], cc: str = "gcc") -> int:
    """Write at `dest` a stub of the shared library `real` with only the symbols whose version
    `keep` accepts; returns how many it kept. Each keeps its kind, size and default-ness."""
    soname, symbols = exports(real)
    kept = [s for s in symbols if keep(s.version)]
    versions = sorted({s.version for s in kept})
    with tempfile.TemporaryDirectory(prefix="kbuild-stub-") as tmp:
        asm, script = Path(tmp) / "stub.s", Path(tmp) / "stub.map"
        asm.write_text(_assembly(kept))
        script.write_text("".join(f"{v} {{ }};\n" for v in versions) + "LOCAL_STUB { local: *; };\n")
        cmd = [cc, "-shared", "-nostdlib", "-o", str(dest), str(asm), f"-Wl,-soname,{soname}",
               f"-Wl,--version-script,{script}"]
        done = proc.run(cmd, check=False, what=f"{cc} (a link stub)")
        if done.returncode:
            raise ToolchainError(f"making a stub of {real} failed: {done.stdout.strip().splitlines()[-1:]}")
    return len(kept)


def _assembly(symbols: list[Export]) -> str:
    lines = []
    for i, s in enumerate(symbols):
        label = f"kbuild_stub_{i}"
        size = max(s.size, 1)
        if s.kind == "func":
            lines += [".text", f".type {label},@function"]
        elif s.kind == "tls":
            lines += ['.section .tbss,"awT",@nobits', f".type {label},@tls_object", f".size {label},{size}"]
        else:
            lines += [".data", f".type {label},@object", f".size {label},{size}"]
        lines += [f"{'.weak' if s.weak else '.globl'} {label}", f"{label}:",
                  "ret" if s.kind == "func" else f".zero {size}",
                  f".symver {label},{s.name}{'@@' if s.default else '@'}{s.version}"]
    return "\n".join(lines) + "\n"
