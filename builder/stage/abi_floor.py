"""The ABI floor of a linked kernel library: the newest glibc / libstdc++ / libgcc symbol versions
it needs, and the manylinux policy those allow.

Symbol versions are read with pyelftools; the policies are project/manylinux.py's (auditwheel's).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile
from elftools.elf.gnuversions import GNUVerNeedSection, GNUVerSymSection
from packaging.version import InvalidVersion, Version

from kbuild_common.errors import UsageError
from builder.project.manylinux import all_policies, find_policy, policy_name

# version-name prefix -> the metadata.json key it is recorded under
FAMILIES = {"GLIBC": "glibc", "GLIBCXX": "glibcxx", "CXXABI": "cxxabi", "GCC": "gcc"}


@dataclass(frozen=True)
class Need:
    """One symbol version a library needs, with the first symbol that needs it (for messages)."""
    library: str  # the file that needs it
    family: str  # GLIBC, GLIBCXX, CXXABI, GCC
    version: str  # "2.34"
    symbol: str

    @property
    def tag(self) -> str:
        return f"{self.family}_{self.version}"


def needs(path: Path) -> list[Need]:
    """Every versioned symbol requirement of the library at `path` in the families above, one per
    (family, version), naming the first undefined symbol that carries it."""
    try:
        with path.open("rb") as f:
            return _needs(ELFFile(f), path.name)
    except (OSError, ELFError) as e:
        raise UsageError(f"{path}: not a readable ELF shared library ({e})") from None


def _needs(elf: ELFFile, name: str) -> list[Need]:
    verneed = next((s for s in elf.iter_sections() if isinstance(s, GNUVerNeedSection)), None)
    versym = next((s for s in elf.iter_sections() if isinstance(s, GNUVerSymSection)), None)
    dynsym = elf.get_section_by_name(".dynsym")
    if verneed is None or dynsym is None:
        return []
    by_index = {}  # the versym index -> the version's name, e.g. 7 -> "GLIBC_2.34"
    for _, auxiliaries in verneed.iter_versions():
        for aux in auxiliaries:
            by_index[aux.entry["vna_other"]] = aux.name
    found: dict[str, Need] = {}
    if versym is not None:
        for i, symbol in enumerate(dynsym.iter_symbols()):
            if symbol["st_shndx"] != "SHN_UNDEF" or not symbol.name:
                continue
            tag = by_index.get(versym.get_symbol(i)["ndx"])
            if tag and tag not in found and (need := _need(name, tag, symbol.name)):
                found[tag] = need
    for tag in by_index.values():  # a requirement no symbol is bound to still counts
        if tag not in found and (need := _need(name, tag, "")):
            found[tag] = need
    return sorted(found.values(), key=lambda n: (n.family, _key(n.version)))


def _need(library: str, tag: str, symbol: str) -> Need | None:
    family, _, version = tag.partition("_")
    if family not in FAMILIES or not version[:1].isdigit():
        return None  # e.g. GLIBC_PRIVATE, GLIBC_ABI_DT_RELR: no version to compare
    return Need(library, family, version, symbol)


def _key(version: str):
    try:
        return Version(version)
    except InvalidVersion:
        return Version("0")


@dataclass(frozen=True)
class Floor:
    """What a variant's libraries need at most, per family, and the manylinux policy that allows it."""
    newest: dict[str, Need]  # family -> the newest requirement
    manylinux: str  # e.g. "manylinux_2_28_x86_64"

    def as_metadata(self) -> dict[str, str]:
        record = {FAMILIES[f]: n.version for f, n in sorted(self.newest.items())}
        record["manylinux"] = self.manylinux
        return record



def floor(libraries: list[Path], arch: str = "x86_64") -> Floor:
    """The floor of a variant: the newest requirement of each family over all its libraries."""
    all_needs = [n for lib in libraries for n in needs(lib)]
    newest: dict[str, Need] = {}
    for n in all_needs:
        if n.family not in newest or _key(n.version) > _key(newest[n.family].version):
            newest[n.family] = n
    versioned = {}
    for n in all_needs:
        versioned.setdefault(n.library, set()).add(n.tag)
    return Floor(newest, all_policies(arch).versioned_symbols_policy(versioned).name)


def above(libraries: list[Path], policy: str, arch: str = "x86_64") -> list[Need]:
    """The requirements of `libraries` that `policy` (e.g. "2_28" or "manylinux_2_28") does not
    allow, newest first within a family."""
    allowed = find_policy(policy, arch).symbol_versions
    bad = [n for lib in libraries for n in needs(lib)
           if n.family in allowed and n.version not in allowed[n.family]]
    return sorted(bad, key=lambda n: (n.family, _key(n.version)), reverse=True)


def above_policy(library: Path, policy: str) -> list[str]:
    """One problem line per symbol family of `library` that `policy` does not allow: its newest
    version and the first symbol that needs it."""
    newest = {}
    for need in above([library], policy):
        newest.setdefault(need.family, need)
    return [f"{library.name} needs {n.tag}{f' ({n.symbol})' if n.symbol else ''}, above {policy_name(policy)}"
            for n in newest.values()]
