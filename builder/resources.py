"""kbuild's own data files (the versions table, templates), read through importlib.resources so a
wheel install finds them as a checkout or an editable install does."""

from __future__ import annotations

from importlib.resources import files


def read_text(name: str) -> str:
    """builder/<name>, e.g. "versions.toml" or "templates/_ops.py.in"."""
    return files(__package__).joinpath(*name.split("/")).read_text(encoding="utf-8")


def read_bytes(name: str) -> bytes:
    return files(__package__).joinpath(*name.split("/")).read_bytes()
