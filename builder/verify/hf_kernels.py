"""Whether a suite that loads its kernel through Hugging Face's `kernels` had that package to do it
with. `kbuild test` points `kernels.get_kernel("<repo-id>", ...)` at the variant under test through
LOCAL_KERNELS (builder/verify/kernel_tests.py); a suite's Python without Hugging Face's `kernels`,
or one that finds something else under that name (a folder named kernels/ on its path, imported
as a namespace package), fails at the suite's first call with an error that names neither. This
module turns that into one line naming the Python and the fix."""

from __future__ import annotations

import json
import re
from pathlib import Path

PLUGIN = "kbuild_hf_kernels"  # builder/templates/kbuild_hf_kernels.py: what `kernels` the suite imported
FOUND_ENV = "KBUILD_TEST_KERNELS_FOUND"
_ABSENT = re.compile(r"No module named 'kernels'")


def found(record: Path) -> dict | None:
    """What the plugin wrote: the `kernels` module the suite imported that is not Hugging Face's
    ({"file": ..., "paths": [...]}), or None."""
    try:
        doc = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def line(output: str, other: dict | None, python: str) -> str | None:
    """The one line for a suite that failed (its pytest `output`) where Hugging Face's `kernels` was
    wanted and `python` lacks it or found `other` under its name; None when that is not why."""
    fix = f"{python} -m pip install kernels"
    if other:
        if other.get("file"):
            what = f"{other['file']}"
        else:
            what = "a namespace package of " + (", ".join(other.get("paths") or []) or "no folder")
        return (f"the suite's `kernels` is not Hugging Face's loader but {what} (in {python}), so it cannot "
                f"load the variant kbuild names in LOCAL_KERNELS: {fix} (or take that folder off the path)")
    if _ABSENT.search(output):
        return (f"the suite imports Hugging Face's `kernels`, which {python} lacks (kbuild names the variant "
                f"to it in LOCAL_KERNELS): {fix}")
    return None
