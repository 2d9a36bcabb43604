"""Import a package from a folder under a chosen module name (shared by the local and hub loaders).

The name is the build's unique id, not the package's own name, so two builds of one kernel can
live in one process; the package's relative imports resolve under that name.

Only verified bytes run: a variant's digest covers its sources, not bytecode, so the package and
its submodules compile from source and never read (or write) `__pycache__` — a planted `.pyc`
that matches a source's size and mtime would otherwise be imported in its place. And a submodule
is found only among the verified files (`files`): Python's own finder prefers a folder `_ops/`
to the module `_ops.py`, so a folder (or a link to one) planted beside a module would run instead.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
import threading
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from .digest import variant_files
from .errors import KernelImportError

# Re-entrant: a kernel's __init__ may itself load a kernel it depends on.
_LOCK = threading.RLock()

if TYPE_CHECKING:
    from ._zip_import import ZipPackage


def import_package(name: str, package_dir: Path, files: Iterable[Path] | None = None) -> ModuleType:
    """`package_dir/__init__.py` as `sys.modules[name]`; the module already there when it was
    imported from the same folder. KernelImportError if `name` is taken by another folder.
    Its submodules come only from `files` (the verified files, default: the package's regular
    files but bytecode, by kbuild.digest's rule)."""
    package_dir = Path(package_dir).resolve()
    with _LOCK:
        loaded = loaded_from(name, package_dir)
        if loaded is not None:
            return loaded
        allowed = {os.path.abspath(p) for p in files} if files is not None else _package_files(package_dir)
        _VERIFIED.register(name, package_dir, allowed)
        return _exec_package(name, package_dir)


def loaded_from(name: str, package_dir: Path) -> ModuleType | None:
    """sys.modules[name] if it came from `package_dir`, None if `name` is free."""
    module = sys.modules.get(name)
    if module is None:
        return None
    origin = getattr(module, "__file__", None)
    # Compare folders, not files: in the Hugging Face cache __init__.py is a link to a blob.
    if origin is not None and Path(origin).parent.resolve() == Path(package_dir).resolve():
        return module
    raise KernelImportError(
        f"cannot import {package_dir} as {name!r}: that name is already loaded from "
        f"{Path(origin).parent if origin else 'elsewhere'}; one build id can be loaded only once "
        "per process, since its ops would register twice in one namespace"
    )


class SourceOnlyLoader(importlib.machinery.SourceFileLoader):
    """A source loader that neither reads nor writes bytecode caches."""

    def get_code(self, fullname):
        path = self.get_filename(fullname)
        return self.source_to_code(self.get_data(path), path)


class VerifiedFiles:
    """A finder on sys.meta_path, asked before Python's own: the submodules of each kernel package
    imported here, found only among that package's verified files, with Python's order (a
    package, then an extension module, then a source module) and SourceOnlyLoader for sources.
    A name under such a package with no verified file is a ModuleNotFoundError here, never
    passed on to the finders that would look at the folder itself."""

    def __init__(self):
        # name -> (its folder, its files, the zip of a zip layout or None)
        self.packages: dict[str, tuple[str, frozenset[str], ZipPackage | None]] = {}

    def register(self, name: str, package_dir: Path, files: set[str], archive: ZipPackage | None = None) -> None:
        # a new dict, not an update: imports on other threads read it without the lock
        self.packages = {**self.packages, name: (str(package_dir), frozenset(files), archive)}
        if self not in sys.meta_path:
            sys.meta_path.insert(0, self)

    def find_spec(self, fullname: str, path=None, target=None):
        if "." not in fullname:  # every import in the process asks: a top-level name is never ours
            return None
        packages = self.packages
        # the longest registered package the name is under (a kernel's name may contain dots)
        owner = next((p for p in sorted(packages, key=len, reverse=True) if fullname.startswith(p + ".")), None)
        if owner is None:
            return None
        folder, files, archive = packages[owner]
        relative = fullname[len(owner) + 1:].split(".")
        base = os.path.join(folder, *relative)
        init = os.path.join(base, "__init__.py")
        if init in files:
            return importlib.util.spec_from_file_location(fullname, init, loader=SourceOnlyLoader(fullname, init),
                                                          submodule_search_locations=[base])
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            if base + suffix in files:
                return importlib.util.spec_from_file_location(
                    fullname, base + suffix, loader=importlib.machinery.ExtensionFileLoader(fullname, base + suffix))
        if base + ".py" in files:
            return importlib.util.spec_from_file_location(fullname, base + ".py",
                                                          loader=SourceOnlyLoader(fullname, base + ".py"))
        # a zip layout's package: its files beside the zip first (the library), then the zip's,
        # as kernels 0.19 searches [variant folder, zip]
        if archive is not None and (spec := archive.find_spec(fullname, "/".join(relative))):
            return spec
        if any(f.startswith(base + os.sep) for f in files):  # a folder of verified files without __init__.py
            spec = importlib.machinery.ModuleSpec(fullname, None, is_package=True)
            spec.submodule_search_locations = [base]
            return spec
        raise ModuleNotFoundError(f"No module named {fullname!r}: no verified file of {folder} provides it",
                                  name=fullname)

    def invalidate_caches(self) -> None:
        pass


_VERIFIED = VerifiedFiles()


def import_zip_package(name: str, archive_path: Path, variant_dir: Path, files: Iterable[Path]) -> ModuleType:
    """kernels 0.19's zip build layout: the package is `<id>.zip` (`__init__.py` at its root), its
    library beside it in `variant_dir`. The zip is one of the verified files; its Python sources
    are compiled from the archive (never a `.pyc` in it), its submodules found in `variant_dir`'s
    verified files first, then in the zip."""
    from ._zip_import import ZipPackage  # noqa: PLC0415 - cost: only a zip layout needs zipfile

    archive_path = Path(archive_path).resolve()
    with _LOCK:
        loaded = loaded_from(name, archive_path)
        if loaded is not None:
            return loaded
        archive = ZipPackage(archive_path)
        _VERIFIED.register(name, Path(variant_dir).resolve(), {os.path.abspath(p) for p in files}, archive)
        spec = archive.find_spec(name, "")
        if spec is None:
            raise KernelImportError(f"{archive_path} has no __init__.py at its root (the zip build layout's package)")
        return _exec(spec)


def _package_files(package_dir: Path) -> set[str]:
    return {os.path.abspath(p) for p in variant_files(package_dir).values() if p.is_file()}


def _exec_package(name: str, package_dir: Path) -> ModuleType:
    init = package_dir / "__init__.py"
    spec = importlib.util.spec_from_file_location(name, init, loader=SourceOnlyLoader(name, str(init)),
                                                  submodule_search_locations=[str(package_dir)])
    if spec is None or spec.loader is None:
        raise KernelImportError(f"cannot import {init}")
    return _exec(spec)


def _exec(spec: importlib.machinery.ModuleSpec) -> ModuleType:
    name = spec.name
    if spec.loader is None:
        raise KernelImportError(f"cannot import {name}: no loader")
    module = importlib.util.module_from_spec(spec)
    # Registered before it runs, as the import system does, so `from . import x` finds it.
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        # A half-imported package would be returned by the next call; drop it and its submodules.
        for key in [k for k in sys.modules if k == name or k.startswith(name + ".")]:
            del sys.modules[key]
        raise
    return module
