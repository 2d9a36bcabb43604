"""What `kbuild lock` is asked to pin: the [tool.kbuild.kernels] table of a Python project's
pyproject.toml.

    [tool.kbuild.kernels]
    "kernels-community/activation" = 1        # version 1 (branch v1)
    "org/rmsnorm" = "<40-hex commit>"         # or a branch / tag name
    "org/rotary@v2" = true                    # the pin in the key
"""

from __future__ import annotations

from pathlib import Path

from builder._toml import tomllib
from kbuild_common.errors import UsageError

PYPROJECT = "pyproject.toml"


def requested_kernels(pyproject: Path) -> list[tuple[str, str | None, int | None]]:
    """(repo_id, revision, version) for each entry of [tool.kbuild.kernels]."""
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except OSError as e:
        raise UsageError(f"{pyproject}: cannot read it ({e.strerror})", hint="pass the project folder") from None
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"{pyproject}: not valid TOML ({e})") from None
    table = data.get("tool", {}).get("kbuild", {}).get("kernels")
    if not isinstance(table, dict) or not table:
        raise UsageError(f"{pyproject}: no [tool.kbuild.kernels] table",
                         hint='add e.g.  [tool.kbuild.kernels]  "org/repo" = 1')
    requests: list[tuple[str, str | None, int | None]] = []
    for key, value in table.items():
        if value is True and "@" in key:
            requests.append((key, None, None))
        elif isinstance(value, int) and not isinstance(value, bool):
            requests.append((key, None, value))
        elif isinstance(value, str):
            requests.append((key, value, None))
        else:
            raise UsageError(f"{pyproject}: [tool.kbuild.kernels] {key!r} = {value!r}: expected a version number, "
                             'a branch/tag/commit string, or true with the pin in the key ("org/repo@v1" = true)')
    return requests
