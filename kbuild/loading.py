"""Find and import a variant folder: pick the one that fits, verify it, import it.

Shared by both loaders, below them: `get_local_kernel` (kbuild.local) points it at a build
folder, `get_kernel` (kbuild.hub_loader) at a variant it downloaded. Neither is imported here;
a kernel's dependencies are loaded through the `load_dependency` its caller passes.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from . import choice, fit
from ._import import import_package, import_zip_package, loaded_from
from .choice import Candidate, format_trace
from .digest import BYTECODE_DIR, variant_files, verify_tree
from .errors import KernelImportError, KernelNotFound, NoVariantFits
from .kernel_deps import LoadOne, load_dependencies, serving
from .metadata import VariantMetadata
from .variants import SystemInfo


def find_variant(path: str | Path, system: SystemInfo) -> Path:
    """The variant folder under `path` that fits `system` best; NoVariantFits (a
    FileNotFoundError), listing every candidate and why it was rejected, when none fits;
    KernelNotFound when there is no kernel there."""
    path = Path(path).expanduser().resolve()
    if not path.is_dir():
        raise KernelNotFound(f"no kernel at {path}: not a folder")
    if (path / "build").is_dir():
        build, trace = path / "build", judge_folder(path / "build", system)
    else:
        build, trace = path, choice.resolve(_folder_names(path), system)  # each name parsed once
        if all(c.variant is None for c in trace):  # no variant folder in it: a variant folder itself
            if (path / "build.toml").is_file() and not (path / "__init__.py").is_file():
                raise KernelNotFound(f"no kernel variants in {path}: it is a kernel project without a build/ "
                                     f"folder; build it first (kbuild build {path})")
            return _single_variant(path, system)
        trace = _judged_by_metadata(path, trace, system)
    if not trace[0].accepted:
        raise NoVariantFits(_no_fit(build, system, trace))
    return build / trace[0].name


def judge_folder(build: Path, system: SystemInfo) -> list[Candidate]:
    """Every variant folder in `build` judged against `system`, by name and then by its metadata
    (ABI floor, GPU archs, python-depends: kbuild.fit), before anything of it is imported."""
    names = _folder_names(build)
    if not names:
        raise KernelNotFound(f"no kernel variants in {build} (this system: {system.describe()})")
    return _judged_by_metadata(build, choice.resolve(names, system), system)


def _folder_names(folder: Path) -> list[str]:
    return sorted(d.name for d in folder.iterdir() if d.is_dir() and not d.name.startswith("."))


def _judged_by_metadata(build: Path, trace: list[Candidate], system: SystemInfo) -> list[Candidate]:
    """`trace` with each candidate its name fits judged again, with its metadata.json (kbuild.fit)."""
    for c in [c for c in trace if c.accepted]:
        trace = choice.apply(trace, c.name, fit.judge(c.variant, system, VariantMetadata.for_variant(build / c.name)))
    return trace


@dataclass(frozen=True)
class LoadedKernel:
    """A kernel variant imported in this process (`get_loaded_kernels`, as kernels 0.18+ has it)."""

    metadata: VariantMetadata
    module: ModuleType
    path: Path  # the variant folder
    repo_id: str | None = None  # the hub repo it came from; None: a local folder
    revision: str | None = None  # the commit it came from


_LOADED: dict[Path, LoadedKernel] = {}


def get_loaded_kernels() -> list[LoadedKernel]:
    """Every kernel variant imported in this process so far, in the order they were first loaded
    (a new list: changing it changes nothing)."""
    return list(_LOADED.values())


def load_variant(variant_dir: str | Path, *, verify: bool = True, load_dependency: LoadOne | None = None,
                 owner: str | None = None, origin: tuple[str, str] | None = None) -> ModuleType:
    """Import one variant folder as `sys.modules[<its id>]` (memoised per folder). Its kernel
    dependencies are loaded first with `load_dependency` (the loaders pass get_kernel on their
    hub; without one, a variant that has dependencies is refused); `owner` names the kernel in
    messages and in the dependency chain (default: the folder); `origin` is the (repo id, commit)
    a hub loader fetched it from, for get_loaded_kernels."""
    variant_dir = Path(variant_dir).resolve()
    meta = VariantMetadata.for_variant(variant_dir)
    module = _load(variant_dir, meta, verify, load_dependency, owner)
    _LOADED[variant_dir] = LoadedKernel(meta, module, variant_dir, *(origin or (None, None)))
    return module


def _load(variant_dir: Path, meta: VariantMetadata, verify: bool, load_dependency: LoadOne | None,
          owner: str | None) -> ModuleType:
    package_dir = _package_dir(variant_dir, meta)
    name = meta.id or _derived_name(meta.python_name or _python_name_of(variant_dir, package_dir), variant_dir)
    loaded = loaded_from(name, package_dir)
    if loaded is not None:
        return loaded  # verified when it was first imported
    if verify and meta.digest is not None:
        verify_tree(variant_dir, meta.digest)  # the zip of a zip layout too: it is one of the served files
    files = importable_files(variant_dir, meta.digest if verify else None)

    def run() -> ModuleType:
        if meta.build_layout == "zip":
            return import_zip_package(name, package_dir, variant_dir, files)
        return import_package(name, package_dir, files)

    if not meta.kernel_depends:
        return run()
    where = owner or str(variant_dir)
    if load_dependency is None:
        raise KernelImportError(f"{where} has kernel dependencies ({', '.join(map(str, meta.kernel_depends))}) "
                                "and no loader for them was given: load it with get_kernel or get_local_kernel")
    deps = load_dependencies(where, meta.kernel_depends, load_dependency)
    with serving(deps, meta.kernel_depends, where):
        return run()


def importable_files(variant_dir: Path, digest: dict[str, str] | None) -> list[Path]:
    """The files an import may read: those the digest just verified lists, else (verified by the
    cache, or not verified at all) the variant's files by kbuild.digest's rule, which never
    enters a linked folder."""
    if digest is not None:
        return [variant_dir / rel for rel in digest]
    return [path for path in variant_files(variant_dir).values() if path.is_file()]


def _single_variant(path: Path, system: SystemInfo) -> Path:
    # A folder named like a variant is judged like one; any other name is the caller's choice.
    trace = choice.resolve([path.name], system)
    if trace[0].variant is None:
        return path
    trace = _judged_by_metadata(path.parent, trace, system)
    if not trace[0].accepted:
        raise NoVariantFits(_no_fit(path, system, trace))
    return path


def _package_dir(variant_dir: Path, meta: VariantMetadata) -> Path:
    """`variant/__init__.py`, else kernel-builder's compat layout `variant/<python_name>/`; for
    the zip layout (kernels 0.19), `variant/<id>.zip`, whose root holds `__init__.py`."""
    if meta.build_layout == "zip":
        archive = variant_dir / f"{meta.id}.zip"
        if not archive.is_file():
            raise KernelNotFound(f"kernel variant {variant_dir} has the zip build layout and no {archive.name}")
        return archive
    if (variant_dir / "__init__.py").is_file():
        return variant_dir
    if meta.python_name:
        candidates = [variant_dir / meta.python_name]
    else:  # no name recorded (old kernel-builder builds): the one package folder there is
        candidates = [d for d in variant_dir.iterdir() if d.is_dir() and d.name != BYTECODE_DIR]
    found = [d for d in candidates if (d / "__init__.py").is_file()]
    if len(found) != 1:
        compat = f"{meta.python_name}/__init__.py" if meta.python_name else "<python_name>/__init__.py"
        raise KernelNotFound(f"kernel variant {variant_dir} has neither __init__.py nor {compat}")
    return found[0]


def _python_name_of(variant_dir: Path, package_dir: Path) -> str:
    return package_dir.name if package_dir != variant_dir else "kernel"


def _derived_name(python_name: str, variant_dir: Path) -> str:
    # Without an id, the folder's path keeps two copies of one kernel apart in sys.modules.
    tag = hashlib.sha256(str(variant_dir).encode()).hexdigest()[:8]
    return "_" + re.sub(r"\W", "_", python_name) + "_" + tag


def _no_fit(folder: Path, system: SystemInfo, trace: list[Candidate]) -> str:
    return (
        f"no kernel variant in {folder} fits this system ({system.describe()}); "
        f"build one for it first. Variants found:\n{format_trace(trace)}"
    )
