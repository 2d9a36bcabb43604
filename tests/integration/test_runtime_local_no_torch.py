"""`import kbuild` does not import torch, in a fresh interpreter."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import kbuild

# --- the runtime stays light ------------------------------------------------------------------


def test_import_kbuild_does_not_import_torch():
    code = (
        "import kbuild, sys; "
        "heavy = [m for m in ('torch', 'setuptools', 'ninja', 'pybind11', 'builder') if m in sys.modules]; "
        "assert not heavy, heavy"
    )
    root = Path(kbuild.__file__).parent.parent
    subprocess.run([sys.executable, "-c", code], check=True, cwd=root)
    assert kbuild.__version__ == "0.1.0"
