"""What the library checks ask of a linked kernel library, whatever its binary format: the one
interface a module per format answers (elf.py: Linux's ELF shared objects; the table is
__init__.py). The checks (builder/stage/: abi_check, link_check, undefined_symbols, abi_report)
ask these questions and parse no file themselves.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kbuild_common.errors import UsageError


class UnreadableLibrary(UsageError):
    """A file that is no readable library of its format: one line naming the file and the format."""

    def __init__(self, path: Path, why: str):
        super().__init__(f"{path}: {why}")
        self.path, self.why = path, why


@dataclass(frozen=True)
class Library:
    """The dynamic-linking facts of one library."""
    path: Path
    needed: tuple[str, ...]  # the libraries it loads, as it names them
    runpath: tuple[str, ...]  # where it looks for them first, its own folder ($ORIGIN) expanded
    undefined: tuple[str, ...] = ()  # the symbols the loader must resolve, in the library's order
    weak: tuple[str, ...] = ()  # undefined symbols it may go without
    defined: frozenset[str] = frozenset()  # the symbols it exports


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


@dataclass(frozen=True)
class Floor:
    """What a variant's libraries need at most, per family, and the lowest policy that allows it."""
    newest: dict[str, Need]  # family -> the newest requirement
    policy: str  # e.g. "manylinux_2_28_x86_64"
    keys: dict[str, str]  # family -> the key metadata.json's `abi` record names it by, in the format's order
    policy_key: str  # the key of the policy there: "manylinux"

    @property
    def needs(self) -> dict[str, str]:
        """family -> the newest version needed, in the format's order of families."""
        return {family: self.newest[family].version for family in self.keys if family in self.newest}

    def as_metadata(self) -> dict[str, str]:
        record = {self.keys[f]: n.version for f, n in sorted(self.newest.items())}
        record[self.policy_key] = self.policy
        return record


class BinaryFormat:
    """The questions the checks ask; a format module answers each (none has a sensible default)."""
    name: str = ""  # "ELF"
    os: str = ""  # the variant os (kbuild/variants.py) whose libraries are in this format: "linux"

    # -- linking ----------------------------------------------------------------------------------

    def library(self, path: Path, symbols: bool = True) -> Library:
        """The library's linking facts (UnreadableLibrary if it is none); `symbols=False` leaves
        out its symbols (for a dependency: libtorch_cpu has ~100k)."""
        raise NotImplementedError

    def exported(self, path: Path, names: list[str]) -> set[str]:
        """Which of `names` the library at `path` defines."""
        raise NotImplementedError

    def loader_dirs(self) -> list[str]:
        """Where the system's loader looks after a library's own run path."""
        raise NotImplementedError

    def locate(self, name: str, dirs: list[str]) -> Path | None:
        """The file a needed library `name` is in the first of `dirs` that holds it."""
        raise NotImplementedError

    def link_name(self, name: str) -> str:
        """The name a link finds the needed library `name` by (a link stub of it has that name)."""
        raise NotImplementedError

    def object_references(self, objects: list[Path], symbol: str) -> list[Path]:
        """The object files among `objects` that leave `symbol` undefined (call it without defining it)."""
        raise NotImplementedError

    def section(self, path: Path, name: str) -> bytes:
        """The contents of the library's section `name` (empty when it has none): a backend reads
        its device code there (builder/backends/base.py, device_code)."""
        raise NotImplementedError

    # -- the ABI floor ----------------------------------------------------------------------------

    def floor(self, libraries: list[Path]) -> Floor:
        """The floor of a variant: the newest requirement of each family over all its libraries."""
        raise NotImplementedError

    def above_policy(self, library: Path, policy: str) -> list[str]:
        """One problem line per family of `library` that `policy` does not allow."""
        raise NotImplementedError

    def policy_error(self, policy: str) -> str | None:
        """Why `policy` names no policy of the format; None if it does."""
        raise NotImplementedError

    def policy_name(self, policy: str) -> str:
        """The full name of `policy` ("2_28" -> "manylinux_2_28_x86_64")."""
        raise NotImplementedError
