"""Python sources read from a kernel's `<id>.zip` (kernels 0.19's zip build layout), for kbuild._import.

zipimport would do, but it prefers a `.pyc` in the archive to its source, and only sources are
verified bytes worth running (kbuild._import says why); so the sources are read from the archive
and compiled here, and the archive is read once, when the kernel is imported.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
import zipfile
from pathlib import Path

if sys.version_info >= (3, 11):
    from importlib.resources.abc import TraversableResources
else:  # Python 3.10 keeps it here
    from importlib.abc import TraversableResources


class ZipPackage:
    """The entries of one zip layout's archive, and the specs of the modules they hold."""

    def __init__(self, path: Path):
        self.path = Path(path)
        with zipfile.ZipFile(self.path) as archive:
            self.names = frozenset(archive.namelist())

    def find_spec(self, fullname: str, relative: str) -> importlib.machinery.ModuleSpec | None:
        """The spec of `fullname`, found at `relative` ("" the root package, "a/b" a submodule), or
        None when the archive does not hold it."""
        prefix = f"{relative}/" if relative else ""
        init = f"{prefix}__init__.py"
        if init in self.names:
            return self._spec(fullname, init, package=prefix)
        if relative and f"{relative}.py" in self.names:
            return self._spec(fullname, f"{relative}.py", package=None)
        if relative and any(n.startswith(prefix) for n in self.names):  # a folder without __init__.py
            spec = importlib.machinery.ModuleSpec(fullname, None, is_package=True)
            spec.submodule_search_locations = [f"{self.path}/{relative}"]
            return spec
        return None

    def _spec(self, fullname: str, entry: str, package: str | None) -> importlib.machinery.ModuleSpec:
        loader = ZipSourceLoader(self.path, entry, package)
        spec = importlib.machinery.ModuleSpec(fullname, loader, origin=f"{self.path}/{entry}",
                                              is_package=package is not None)
        if package is not None:
            spec.submodule_search_locations = [f"{self.path}/{package}".rstrip("/")]
        spec.has_location = True  # sets __file__ to the entry's path inside the archive, as kernels 0.19 does
        return spec


class ZipSourceLoader(importlib.abc.InspectLoader):
    """Runs one source file of the archive; never reads or writes bytecode."""

    def __init__(self, archive: Path, entry: str, package: str | None):
        self.archive, self.entry, self.package = archive, entry, package

    def get_filename(self, fullname: str) -> str:
        return f"{self.archive}/{self.entry}"

    def get_source(self, fullname: str) -> str:
        with zipfile.ZipFile(self.archive) as archive:
            return importlib.util.decode_source(archive.read(self.entry))

    def get_code(self, fullname: str):
        return compile(self.get_source(fullname), self.get_filename(fullname), "exec", dont_inherit=True)

    def is_package(self, fullname: str) -> bool:
        return self.package is not None

    def exec_module(self, module) -> None:
        exec(self.get_code(module.__name__), module.__dict__)

    def get_resource_reader(self, fullname: str):
        # importlib.resources.files(<kernel>) reads data files shipped inside the archive
        return _ZipResources(self.archive, self.package) if self.package is not None else None


class _ZipResources(TraversableResources):
    def __init__(self, archive: Path, package: str):
        self.archive, self.package = archive, package

    def files(self):
        return zipfile.Path(self.archive, at=self.package)
