"""Linux's binary format: ELF shared objects, read with pyelftools; their floor is the manylinux
policy their GNU symbol versions allow (manylinux_floor.py, auditwheel's policies)."""

from __future__ import annotations

import platform
from pathlib import Path

from elftools.elf.dynamic import DynamicSection
from elftools.elf.hash import ELFHashSection, GNUHashSection
from elftools.elf.sections import SymbolTableSection

from builder.project import manylinux
from builder.toolchains.binary import manylinux_floor
from builder.toolchains.binary.base import BinaryFormat, Floor, Library, UnreadableLibrary
from builder.toolchains.binary.elf_file import open_elf, tag_string


class Elf(BinaryFormat):
    name = "ELF"
    os = "linux"

    def library(self, path: Path, symbols: bool = True) -> Library:
        with open_elf(path) as elf:
            needed: list[str] = []
            runpath: list[str] = []
            for section in elf.iter_sections():
                if isinstance(section, DynamicSection):
                    for tag in section.iter_tags():
                        if tag.entry.d_tag == "DT_NEEDED":
                            needed.append(tag_string(tag))
                        elif tag.entry.d_tag in ("DT_RUNPATH", "DT_RPATH"):
                            runpath += [e.replace("$ORIGIN", str(path.parent)).replace("${ORIGIN}", str(path.parent))
                                        for e in tag_string(tag).split(":") if e]
            undefined: list[str] = []
            weak: list[str] = []
            defined: set[str] = set()
            dynsym = elf.get_section_by_name(".dynsym") if symbols else None
            if isinstance(dynsym, SymbolTableSection):
                for s in dynsym.iter_symbols():
                    if s["st_shndx"] != "SHN_UNDEF":
                        defined.add(s.name)
                    elif s.name:
                        (weak if s["st_info"]["bind"] == "STB_WEAK" else undefined).append(s.name)
        return Library(path, tuple(needed), tuple(runpath), tuple(undefined), tuple(weak), frozenset(defined))

    def exported(self, path: Path, names: list[str]) -> set[str]:
        # looked up in its symbol hash table (libtorch_cpu exports ~100k symbols: a lookup each, not a scan)
        with open_elf(path) as elf:
            tables = [s for s in elf.iter_sections() if isinstance(s, (GNUHashSection, ELFHashSection))]
            tables.sort(key=lambda s: not isinstance(s, GNUHashSection))  # GNU's first: every linker writes it
            if tables:
                found = ((name, tables[0].get_symbol(name)) for name in names)
                return {name for name, sym in found if sym is not None and sym["st_shndx"] != "SHN_UNDEF"}
            dynsym = elf.get_section_by_name(".dynsym")
            if not isinstance(dynsym, SymbolTableSection):
                return set()
            wanted = set(names)
            return {s.name for s in dynsym.iter_symbols() if s.name in wanted and s["st_shndx"] != "SHN_UNDEF"}

    def loader_dirs(self) -> list[str]:
        # /etc/ld.so.conf's folders and the usual multiarch and lib64 folders
        dirs = []
        conf = Path("/etc/ld.so.conf.d")
        for f in sorted(conf.glob("*.conf")) if conf.is_dir() else []:
            try:
                dirs += [line.strip() for line in f.read_text().splitlines() if line.strip().startswith("/")]
            except OSError:
                continue
        triplet = f"{platform.machine()}-linux-gnu"
        dirs += [f"/lib/{triplet}", f"/usr/lib/{triplet}", "/lib64", "/usr/lib64", "/lib", "/usr/lib"]
        return list(dict.fromkeys(dirs))

    def locate(self, name: str, dirs: list[str]) -> Path | None:
        if "/" in name:
            return Path(name) if Path(name).is_file() else None
        return next((p for d in dirs if (p := Path(d) / name).is_file()), None)

    def link_name(self, name: str) -> str:
        return name.split(".so")[0] + ".so"  # libcuda.so.1 -> libcuda.so

    def object_references(self, objects: list[Path], symbol: str) -> list[Path]:
        found = []
        for obj in objects:
            try:
                with open_elf(obj) as elf:
                    symtab = elf.get_section_by_name(".symtab")
                    if isinstance(symtab, SymbolTableSection) and any(
                            s.name == symbol and s["st_shndx"] == "SHN_UNDEF" for s in symtab.iter_symbols()):
                        found.append(obj)
            except UnreadableLibrary:
                continue
        return found

    def section(self, path: Path, name: str) -> bytes:
        with open_elf(path) as elf:
            section = elf.get_section_by_name(name)
            return section.data() if section is not None else b""

    def floor(self, libraries: list[Path]) -> Floor:
        return manylinux_floor.floor(libraries)

    def above_policy(self, library: Path, policy: str) -> list[str]:
        return manylinux_floor.above_policy(library, policy)

    def policy_error(self, policy: str) -> str | None:
        return manylinux.policy_error(policy)

    def policy_name(self, policy: str) -> str:
        return manylinux.policy_name(policy)


ELF = Elf()
