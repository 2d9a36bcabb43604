"""A variant's `python-depends` (metadata.json) against this Python environment.

The names are kernel-builder's allow-list, not pip names: each stands for a PyPI package and the
module it provides, which is what is looked for (without importing it). Unknown names are
refused, as Hugging Face's loader refuses them: kbuild cannot tell what they need.
"""

from __future__ import annotations

import importlib.util
import sys

# name -> (the PyPI package, its top-level module; None: it installs libraries, no module)
GENERAL: dict[str, tuple[str, str | None]] = {
    "einops": ("einops", "einops"),
    "helion": ("helion", "helion"),
    "tvm-ffi": ("apache-tvm-ffi", "tvm_ffi"),
}
BY_BACKEND: dict[str, dict[str, tuple[str, str | None]]] = {
    "cuda": {"nvidia-cutlass-dsl": ("nvidia-cutlass-dsl", "cutlass")},
    "neuron": {"nki": ("nki", "nki")},
    "xpu": {"onednn": ("onednn-devel", None)},
}


def missing(depends: tuple[str, ...], backend: str) -> str | None:
    """Why a `backend` variant listing `depends` cannot load in this environment, in one line
    naming what to install; None when every dependency is there."""
    known = {**GENERAL, **BY_BACKEND.get(backend, {})}
    unknown = [name for name in depends if name not in known]
    if unknown:
        return (f"python-depends lists {', '.join(map(repr, unknown))}, which this kbuild does not know "
                f"(known for {backend or 'any backend'}: {', '.join(known)}); a newer kbuild may")
    absent = []
    for name in depends:
        package, module = known[name]
        if module and not _importable(module):  # no module: a package of libraries, not looked for
            absent.append(package)
    if not absent:
        return None
    packages = " ".join(dict.fromkeys(absent))
    what = "package" if len(absent) == 1 else "packages"
    return f"needs the Python {what} {', '.join(dict.fromkeys(absent))}, not installed here: pip install {packages}"


def _importable(module: str) -> bool:
    if module in sys.modules:
        return True
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a broken installation or a module without a spec
        return False
