"""builder/versions.toml, the one reader: the torch releases and CUDA versions kbuild builds for,
and how each toolchain is installed (its own comments describe every table). The matrix reads
[torch], [cuda] and [default] (builder/plan/matrix.py), the toolchain store [cuda] toolkit,
[cutlass] and [sysroot]; both get them from here.
"""

from __future__ import annotations

from pathlib import Path

from builder import resources
from builder._toml import tomllib

SOURCE = "builder/versions.toml"  # kbuild's own table (packaged data), as error messages name it


def load_versions_table(path: Path | None = None) -> dict:
    """The table, parsed: kbuild's own, or the file at `path` (tests give their own)."""
    return tomllib.loads(Path(path).read_text() if path else resources.read_text("versions.toml"))
