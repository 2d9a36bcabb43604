"""kbuild's pytest plugin for `kbuild test`, loaded with `-p` from the suite's temporary folder: at the
session's end, when the suite imported a module named `kernels` that is not Hugging Face's loader
(it has no `get_kernel`: e.g. a folder named kernels/ on the path, imported as a namespace package),
where that module came from is written to $KBUILD_TEST_KERNELS_FOUND as JSON, for the one line
kbuild test prints about it (builder/verify/hf_kernels.py). It changes nothing in the suite."""

import json
import os
import sys


def pytest_sessionfinish(session):
    out = os.environ.get("KBUILD_TEST_KERNELS_FOUND")
    found = sys.modules.get("kernels")
    if not out or found is None or hasattr(found, "get_kernel"):
        return
    file = getattr(found, "__file__", None)
    paths = [str(p) for p in (getattr(found, "__path__", None) or [])]
    with open(out, "w", encoding="utf-8") as f:
        json.dump({"file": file, "paths": paths}, f)
