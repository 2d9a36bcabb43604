"""GNU symbol versions in an ELF library (pyelftools): the versions it needs, with the first
symbol bound to each; the versioned symbols it defines; the symbols it imports unversioned.
The manylinux floor (manylinux_floor.py) and the glibc sysroot (builder/toolchains/sysroot.py,
elf_stub.py) read them here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from elftools.elf.dynamic import DynamicSection
from elftools.elf.gnuversions import GNUVerDefSection, GNUVerNeedSection, GNUVerSymSection
from elftools.elf.sections import SymbolTableSection

from builder.toolchains.binary.elf_file import open_elf, tag_string


def required(path: Path) -> dict[str, str]:
    """Every symbol version the library at `path` needs ("GLIBC_2.34"), each with the first
    undefined symbol that carries it ("" when no symbol is bound to it), in the order met."""
    with open_elf(path) as elf:
        verneed = next((s for s in elf.iter_sections() if isinstance(s, GNUVerNeedSection)), None)
        versym = next((s for s in elf.iter_sections() if isinstance(s, GNUVerSymSection)), None)
        dynsym = elf.get_section_by_name(".dynsym")
        if verneed is None or not isinstance(dynsym, SymbolTableSection):
            return {}
        by_index = {}  # the versym index -> the version's name, e.g. 7 -> "GLIBC_2.34"
        for _, auxiliaries in verneed.iter_versions():
            for aux in auxiliaries:
                by_index[aux.entry["vna_other"]] = aux.name
        found: dict[str, str] = {}
        if versym is not None:
            for i, symbol in enumerate(dynsym.iter_symbols()):
                if symbol["st_shndx"] != "SHN_UNDEF" or not symbol.name:
                    continue
                tag = by_index.get(versym.get_symbol(i)["ndx"])
                if tag:
                    found.setdefault(tag, symbol.name)
        for tag in by_index.values():  # a requirement no symbol is bound to still counts
            found.setdefault(tag, "")
        return found


@dataclass(frozen=True)
class Export:
    name: str
    version: str  # e.g. "GLIBCXX_3.4.21"
    default: bool  # name@@version (what new links bind to) rather than name@version
    kind: str  # "func" | "object" | "tls"
    size: int
    weak: bool


def exports(path: Path) -> tuple[str, list[Export]] | None:
    """The soname and the versioned symbols `path` defines; None when it defines no symbol versions."""
    with open_elf(path) as elf:
        dynamic = elf.get_section_by_name(".dynamic")
        verdef = next((s for s in elf.iter_sections() if isinstance(s, GNUVerDefSection)), None)
        versym = next((s for s in elf.iter_sections() if isinstance(s, GNUVerSymSection)), None)
        dynsym = elf.get_section_by_name(".dynsym")
        if verdef is None or versym is None or not isinstance(dynsym, SymbolTableSection):
            return None
        tags = dynamic.iter_tags() if isinstance(dynamic, DynamicSection) else ()
        soname = next((tag_string(t) for t in tags if t.entry.d_tag == "DT_SONAME"), path.name)
        names = {v.entry["vd_ndx"]: next(aux).name for v, aux in verdef.iter_versions()}
        found = []
        for i, sym in enumerate(dynsym.iter_symbols()):
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


def unversioned_imports(path: Path) -> set[str]:
    """The names `path` imports without a symbol version (the linker found no versioned definition)."""
    with open_elf(path) as elf:
        versym = next((s for s in elf.iter_sections() if isinstance(s, GNUVerSymSection)), None)
        dynsym = elf.get_section_by_name(".dynsym")
        found: set[str] = set()
        if not isinstance(dynsym, SymbolTableSection):
            return found  # no dynamic symbols: nothing imported
        for i, sym in enumerate(dynsym.iter_symbols()):
            if sym["st_shndx"] != "SHN_UNDEF" or not sym.name:
                continue
            ndx = versym.get_symbol(i)["ndx"] if versym is not None else "VER_NDX_GLOBAL"
            if ndx in ("VER_NDX_LOCAL", "VER_NDX_GLOBAL", 0, 1):
                found.add(sym.name)
        return found

