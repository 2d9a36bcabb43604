"""The ABI floor of an ELF library linked against glibc: the newest glibc / libstdc++ / libgcc
symbol versions it needs, and the manylinux policy those allow.

Symbol versions are read by gnu_versions.py; the policies are project/manylinux.py's (auditwheel's).
"""

from __future__ import annotations

from pathlib import Path

from packaging.version import InvalidVersion, Version

from builder.project.manylinux import all_policies, find_policy, policy_name
from builder.toolchains.binary.base import Floor, Need
from builder.toolchains.binary.gnu_versions import required

# version-name prefix -> the metadata.json key it is recorded under
FAMILIES = {"GLIBC": "glibc", "GLIBCXX": "glibcxx", "CXXABI": "cxxabi", "GCC": "gcc"}


def needs(path: Path) -> list[Need]:
    """Every versioned symbol requirement of the library at `path` in the families above, one per
    (family, version), naming the first undefined symbol that carries it."""
    found = [need for tag, symbol in required(path).items() if (need := _need(path.name, tag, symbol))]
    return sorted(found, key=lambda n: (n.family, _key(n.version)))


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


def floor(libraries: list[Path], arch: str = "x86_64") -> Floor:
    """The floor of a variant: the newest requirement of each family over all its libraries."""
    all_needs = [n for lib in libraries for n in needs(lib)]
    newest: dict[str, Need] = {}
    for n in all_needs:
        if n.family not in newest or _key(n.version) > _key(newest[n.family].version):
            newest[n.family] = n
    versioned: dict[str, set[str]] = {}
    for n in all_needs:
        versioned.setdefault(n.library, set()).add(n.tag)
    return Floor(newest, all_policies(arch).versioned_symbols_policy(versioned).name, FAMILIES, "manylinux")


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
    newest: dict[str, Need] = {}
    for need in above([library], policy):
        newest.setdefault(need.family, need)
    return [f"{library.name} needs {n.tag}{f' ({n.symbol})' if n.symbol else ''}, above {policy_name(policy)}"
            for n in newest.values()]
