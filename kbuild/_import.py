"""Import a package from a folder under a chosen module name (shared by the local and hub loaders).

The name is the build's unique id, not the package's own name, so two builds of one kernel can
live in one process; the package's relative imports resolve under that name.

Only verified bytes run: a variant's digest covers its sources, not bytecode, so the package and
its submodules compile from source and never read (or write) `__pycache__` — a planted `.pyc`
that matches a source's size and mtime would otherwise be imported in its place.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
import threading
from pathlib import Path
from types import ModuleType

from .digest import BYTECODE_DIR
from .errors import KernelImportError

# Re-entrant: a kernel's __init__ may itself load a kernel it depends on.
_LOCK = threading.RLock()


def import_package(name: str, package_dir: Path) -> ModuleType:
    """`package_dir/__init__.py` as `sys.modules[name]`; the module already there when it was
    imported from the same folder. KernelImportError if `name` is taken by another folder."""
    package_dir = Path(package_dir).resolve()
    with _LOCK:
        loaded = loaded_from(name, package_dir)
        if loaded is not None:
            return loaded
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


def _source_only_finders(package_dir: Path) -> None:
    """Submodules are found through sys.path_importer_cache, one finder per folder: give every
    folder of the package a finder whose source loader is SourceOnlyLoader."""
    loaders = [(importlib.machinery.ExtensionFileLoader, importlib.machinery.EXTENSION_SUFFIXES),
               (SourceOnlyLoader, importlib.machinery.SOURCE_SUFFIXES)]
    for dirpath, dirnames, _ in os.walk(package_dir):
        dirnames[:] = [d for d in dirnames if d != BYTECODE_DIR]
        sys.path_importer_cache[dirpath] = importlib.machinery.FileFinder(dirpath, *loaders)


def _exec_package(name: str, package_dir: Path) -> ModuleType:
    init = package_dir / "__init__.py"
    _source_only_finders(package_dir)
    spec = importlib.util.spec_from_file_location(name, init, loader=SourceOnlyLoader(name, str(init)),
                                                  submodule_search_locations=[str(package_dir)])
    if spec is None or spec.loader is None:
        raise KernelImportError(f"cannot import {init}")
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
