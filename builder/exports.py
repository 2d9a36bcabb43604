"""What a folder of builder/ offers outside itself: the names its `__init__.py` lists (`__all__`),
each imported from its module on first use, so that importing one module of a folder costs none
of the others (`kbuild --help` imports builder/config and builder/hub), and `python -m
builder.commands.main` finds main not yet imported. bench/ imports only these names
(tests/unit/test_bench_imports.py holds it, that each name still exists, and that each `__init__.py`
imports the same names from the same modules under `if TYPE_CHECKING:`, which is what mypy reads)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_exports(package: str, **modules: tuple[str, ...]) -> tuple[list[str], Callable[[str], Any]]:
    """`__all__` and the module `__getattr__` (PEP 562) of `package`, whose module `m` (one of its
    own: a folder re-exports only what lies in it) provides the names `modules[m]`."""
    home = {name: f"{package}.{module}" for module, names in modules.items() for name in names}

    def __getattr__(name: str) -> Any:
        if name not in home:  # also how `from package import submodule` finds a submodule not yet imported
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(home[name]), name)

    return sorted(home), __getattr__
