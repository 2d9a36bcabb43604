"""Checks on a linked kernel library before it is staged (pyelftools reads the ELF file).

A library that would crash or fail to load in torch's process is a build failure with a reason,
not a segfault on a user's GPU later.
"""

from __future__ import annotations

from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.elf.dynamic import DynamicSection
from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection

# Defined only inside libstdc++ itself (locale and iostream set-up), never instantiated from
# headers: a library that defines one carries a private static copy of libstdc++.
_LIBSTDCXX_MARKERS = {"_ZNSt6locale5_ImplC2Em", "_ZNSt6locale7classicEv", "_ZNSt8ios_base4InitC1Ev"}


def library_problems(path: Path) -> list[str]:
    """What is wrong with the shared library at `path` (empty when nothing is)."""
    try:
        with path.open("rb") as f:
            elf = ELFFile(f)
            needed = [t.needed for s in elf.iter_sections() if isinstance(s, DynamicSection)
                      for t in s.iter_tags() if t.entry.d_tag == "DT_NEEDED"]
            dynsym = elf.get_section_by_name(".dynsym")
            defined = set()
            if isinstance(dynsym, SymbolTableSection):
                defined = {s.name for s in dynsym.iter_symbols() if s["st_shndx"] != "SHN_UNDEF"}
    except (OSError, ELFError) as e:
        return [f"{path.name}: not a readable ELF shared library ({e})"]
    problems = []
    if _LIBSTDCXX_MARKERS & defined and not any(n.startswith("libstdc++.so") for n in needed):
        problems.append(f"{path.name} carries its own static copy of libstdc++ (the C++ compiler linked "
                        "libstdc++.a); torch extensions must share torch's libstdc++.so.6")
    return problems
