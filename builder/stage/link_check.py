"""Does a linked kernel library resolve every symbol it leaves undefined? (pyelftools reads the ELF files.)

A shared library links even when it calls a function nothing defines (`-shared` allows undefined
symbols); it then fails at `import` with "undefined symbol". This check finds such symbols before
the library is staged: each undefined, non-weak dynamic symbol must be defined by a library it
loads (its DT_NEEDED entries and theirs, found as the dynamic loader finds them) or be part of the
Python C API, which the interpreter that imports it provides.
"""

from __future__ import annotations

import platform
import re
from dataclasses import dataclass
from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile
from elftools.elf.hash import ELFHashSection, GNUHashSection
from elftools.elf.sections import SymbolTableSection

_PYTHON_API = re.compile(r"^_?Py")  # defined by the python executable (abi_check.py checks which)
# libraries only a GPU machine's driver installs; the CUDA toolkit ships link stubs for them
_DRIVER_STUBS = ("libcuda.so", "libnvidia-ml.so")


@dataclass(frozen=True)
class Library:
    path: Path
    needed: tuple[str, ...]
    runpath: tuple[str, ...]  # DT_RUNPATH or DT_RPATH entries, $ORIGIN expanded
    undefined: tuple[str, ...]  # undefined, non-weak dynamic symbols


def read_library(path: Path, symbols: bool = True) -> Library:
    """The dynamic-linking facts of the ELF shared library at `path` (OSError, ELFError if unreadable);
    `symbols=False` leaves out its undefined symbols (reading them walks every dynamic symbol, which
    for libtorch_cpu is ~100k)."""
    with path.open("rb") as f:
        elf = ELFFile(f)
        needed, runpath = [], []
        for section in elf.iter_sections():
            if isinstance(section, DynamicSection):
                for tag in section.iter_tags():
                    if tag.entry.d_tag == "DT_NEEDED":
                        needed.append(tag.needed)
                    elif tag.entry.d_tag in ("DT_RUNPATH", "DT_RPATH"):
                        entries = tag.runpath if tag.entry.d_tag == "DT_RUNPATH" else tag.rpath
                        runpath += [e.replace("$ORIGIN", str(path.parent)).replace("${ORIGIN}", str(path.parent))
                                    for e in entries.split(":") if e]
        undefined = []
        dynsym = elf.get_section_by_name(".dynsym") if symbols else None
        if isinstance(dynsym, SymbolTableSection):
            undefined = [s.name for s in dynsym.iter_symbols()
                         if s.name and s["st_shndx"] == "SHN_UNDEF" and s["st_info"]["bind"] != "STB_WEAK"]
    return Library(path, tuple(needed), tuple(runpath), tuple(undefined))


def system_library_dirs() -> list[str]:
    """Where the dynamic loader looks after a library's own run path: /etc/ld.so.conf's folders and
    the usual multiarch and lib64 folders."""
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


@dataclass(frozen=True)
class LinkCheck:
    undefined: tuple[str, ...]  # symbols no loaded library defines, in the library's order
    not_found: tuple[str, ...]  # needed libraries not found here (their symbols were not looked at)


def unresolved_symbols(library: Path, search_dirs: list[str], stub_dirs: list[str] = ()) -> LinkCheck:
    """The undefined symbols of `library` that nothing it loads defines. `search_dirs`: the -L
    folders it was linked with (torch's, the CUDA runtime's), looked in after each library's run
    path and before the system's; `stub_dirs`: where link stubs of driver libraries lie (a machine
    without a GPU has no libcuda.so.1, but the stub names the same symbols)."""
    lib = read_library(library)
    left = {s: None for s in lib.undefined if not _PYTHON_API.match(s)}
    queue, seen, missing = [(n, lib) for n in lib.needed], set(), []
    dirs = [*search_dirs, *system_library_dirs()]
    while queue and left:
        name, parent = queue.pop(0)  # breadth first, the loader's order
        if name in seen:
            continue
        seen.add(name)
        path = _find(name, [*parent.runpath, *dirs], stub_dirs)
        if path is None:
            missing.append(name)
            continue
        try:
            dep = read_library(path, symbols=False)
            for symbol in _exported(path, list(left)):
                del left[symbol]
        except (OSError, ELFError):
            missing.append(name)
            continue
        queue += [(n, dep) for n in dep.needed]
    return LinkCheck(tuple(left), tuple(missing))


def _find(soname: str, dirs: list[str], stub_dirs) -> Path | None:
    if "/" in soname:
        return Path(soname) if Path(soname).is_file() else None
    for d in dirs:
        if (p := Path(d) / soname).is_file():
            return p
    base = soname.split(".so")[0] + ".so"
    if base in _DRIVER_STUBS:
        for d in stub_dirs:
            if (p := Path(d) / base).is_file():
                return p
    return None


def _exported(path: Path, symbols: list[str]) -> set[str]:
    """Which of `symbols` the library at `path` defines, looked up in its symbol hash table
    (libtorch_cpu exports ~100k symbols: a lookup each, not a scan)."""
    with path.open("rb") as f:
        elf = ELFFile(f)
        tables = [s for s in elf.iter_sections() if isinstance(s, (GNUHashSection, ELFHashSection))]
        tables.sort(key=lambda s: not isinstance(s, GNUHashSection))  # GNU's first: every linker writes it
        if tables:
            found = ((name, tables[0].get_symbol(name)) for name in symbols)
            return {name for name, sym in found if sym is not None and sym["st_shndx"] != "SHN_UNDEF"}
        dynsym = elf.get_section_by_name(".dynsym")
        if not isinstance(dynsym, SymbolTableSection):
            return set()
        wanted = set(symbols)
        return {s.name for s in dynsym.iter_symbols() if s.name in wanted and s["st_shndx"] != "SHN_UNDEF"}


def object_references(objects: list[Path], symbol: str) -> list[Path]:
    """The object files among `objects` that leave `symbol` undefined (call it without defining it)."""
    found = []
    for obj in objects:
        try:
            with obj.open("rb") as f:
                symtab = ELFFile(f).get_section_by_name(".symtab")
                if isinstance(symtab, SymbolTableSection) and any(
                        s.name == symbol and s["st_shndx"] == "SHN_UNDEF" for s in symtab.iter_symbols()):
                    found.append(obj)
        except (OSError, ELFError):
            continue
    return found

