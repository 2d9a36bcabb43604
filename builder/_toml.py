"""tomllib on every supported Python: the standard library's from 3.11, its backport tomli on 3.10."""

import sys

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised by the Python 3.10 wheel check
    import tomli as tomllib

__all__ = ["tomllib"]
