"""Each freshly linked kernel library imported, as Python imports an extension (dlopen with
RTLD_NOW, then its PyInit), in the torch that built it, before it is staged.

The file checks (abi_check.py, link_check.py) read the library; this runs it: static
initialisers (op registration), symbol versions against the libstdc++ torch loads, every
dependency found. One process per torch imports all of its libraries; if that process dies (a
crashing static initialiser), each library is imported alone so the failure lands on the right one.
"""

from __future__ import annotations

import json
from pathlib import Path

from builder.stage.link_check import DRIVER_LIBRARIES
from kbuild_common import proc
from kbuild_common.errors import CommandError
from kbuild_common.notices import notice, trace

_SCRIPT = r"""
import importlib.util, json, sys
try:
    import torch
except BaseException as e:
    print("KBUILD-LOAD " + json.dumps({"torch": f"{type(e).__name__}: {e}"}))
    sys.exit(0)
errors = {}
for arg in sys.argv[1:]:
    name, path = arg.split("=", 1)
    try:
        spec = importlib.util.spec_from_file_location(name, path)
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
        errors[path] = None
    except BaseException as e:
        errors[path] = f"{type(e).__name__}: {e}"
print("KBUILD-LOAD " + json.dumps({"errors": errors}))
"""


def load_errors(python: str, libraries: dict[Path, str], timeout: float = 900) -> dict[Path, str]:
    """Why each of `libraries` (path -> its module name, the op namespace) failed to import in
    `python`; a library that imported, or that this machine cannot try, has no entry."""
    if not libraries:
        return {}
    found = _run(python, libraries, timeout)
    if found is None and len(libraries) > 1:
        found = {}
        for path, name in libraries.items():
            found.update(_run(python, {path: name}, timeout) or {path: "the importing process died"})
    return {path: error for path, error in (found or {}).items() if error}


def _run(python: str, libraries: dict[Path, str], timeout: float) -> dict[Path, str | None] | None:
    """None when the process died before it reported."""
    args = [f"{name}={path}" for path, name in libraries.items()]
    try:
        done = proc.run([python, "-c", _SCRIPT, *args], timeout=timeout, check=False, what="import check")
    except CommandError as e:  # the python is gone or hung: nothing to say about the libraries
        notice(f"kernel libraries not import-checked: {e}")
        return {}
    line = next((ln for ln in reversed(done.stdout.splitlines()) if ln.startswith("KBUILD-LOAD ")), None)
    if line is None:
        if len(libraries) == 1:
            last = done.stdout.strip().splitlines()[-1:] or [""]
            return {next(iter(libraries)): f"the importing process died (exit {done.returncode}) {last[0]}".strip()}
        return None
    report = json.loads(line[len("KBUILD-LOAD "):])
    if "torch" in report:
        notice(f"kernel libraries not import-checked: torch does not import in {python} ({report['torch']})")
        return {}
    errors = {}
    for path, error in report["errors"].items():
        # a machine without a GPU cannot load what needs the driver, which says nothing about the library
        driver = next((b.driver for lib, b in DRIVER_LIBRARIES.items()
                       if error and lib in error and "cannot open shared object file" in error), None)
        if driver:
            trace(f"{Path(path).name} not import-checked: it needs {driver}, which this machine lacks")
            error = None
        errors[Path(path)] = error
    return errors
