"""Kernel dependencies (`kernel-depends` in metadata.json): the other Hub kernels a kernel asks for
with `kernels.get_kernel_dep(repo_id)` while it imports.

That function belongs to Hugging Face's `kernels` package (>= 0.17), which a kernel with
dependencies imports itself; it answers from a per-import context. kbuild loads each dependency
first, with its own verified loader and the same hub, trust and system, then imports the kernel
inside that context: the kernel loads the same way through either loader.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from types import ModuleType

from .errors import KernelError, KernelImportError

# The repos whose dependencies are being loaded, outermost first: a cycle would never end.
_CHAIN: ContextVar[tuple[str, ...]] = ContextVar("kbuild_kernel_dep_chain", default=())


@dataclass(frozen=True)
class KernelPin:
    """One `kernel-depends` entry: a repo pinned by a major version or by a revision."""

    repo_id: str
    version: int | None = None
    revision: str | None = None

    def __str__(self) -> str:
        return f"{self.repo_id}@v{self.version}" if self.version is not None else f"{self.repo_id}@{self.revision}"

    def as_metadata(self) -> dict:
        """The metadata.json entry (kernel-builder's shape), also build.toml's."""
        pin = {"version": self.version} if self.version is not None else {"revision": self.revision}
        return {"repo-id": self.repo_id, **pin}


LoadOne = Callable[[KernelPin], ModuleType]


def load_dependencies(owner: str, pins: tuple[KernelPin, ...], load_one: LoadOne) -> dict[str, ModuleType]:
    """repo id -> loaded module, for each pin of `owner` (a repo id, or a folder; named in errors)."""
    _get_kernel_dep_context(pins, owner)  # before anything is fetched: without it the kernel cannot import
    chain = _CHAIN.get()
    chain = chain if chain and chain[-1] == owner else (*chain, owner)
    loaded = {}
    for pin in pins:
        if pin.repo_id in chain:
            raise KernelImportError(f"{owner}: cyclic kernel dependency {' -> '.join((*chain, pin.repo_id))}")
        token = _CHAIN.set((*chain, pin.repo_id))
        try:
            loaded[pin.repo_id] = load_one(pin)
        except (KernelError, OSError, ImportError, ValueError) as e:
            raise KernelImportError(f"{owner}: its kernel dependency {pin} could not be loaded: {e}") from e
        finally:
            _CHAIN.reset(token)
    return loaded


@contextmanager
def serving(deps: dict[str, ModuleType], pins: tuple[KernelPin, ...], where: str) -> Iterator[None]:
    """While the kernel imports, `kernels.get_kernel_dep(repo_id)` answers with `deps`."""
    with _get_kernel_dep_context(pins, where)(deps):
        yield


def _get_kernel_dep_context(pins: tuple[KernelPin, ...], where: str):
    try:
        from kernels.deps import use_kernel_deps
    except ImportError:
        raise KernelImportError(f"{where} has kernel dependencies ({', '.join(map(str, pins))}) that it takes "
                          "from Hugging Face's kernels.get_kernel_dep: install kernels >= 0.17") from None
    return use_kernel_deps
