"""builder/versions.toml, the one reader: the torch releases and the toolkit versions (CUDA's) kbuild
builds for, and how each toolchain is installed (its own comments describe every table). The matrix
reads [torch], each backend's toolkit table ([cuda]: builder/backends/, `toolkit_table`) and
[default] (builder/plan/matrix.py), the toolchain store [cuda] toolkit, [cutlass] and [sysroot]; both
get them from here.

An overlay table (KBUILD_VERSIONS, else versions.toml in kbuild's config folder: the settings
cascade's `versions_overlay`) is merged over kbuild's own, so a torch or CUDA release that came out
after this kbuild is one file away: its [torch."X.Y"] and [cuda."X.Y"] rows (and a toolkit table's
rows) add to or replace the shipped rows whole, and the keys of its [default], [cutlass] and [sysroot] replace
theirs. Every row keeps where it came from (`origins`), which `kbuild variants` shows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from builder import resources
from builder._toml import tomllib
from builder.backends import BACKENDS
from builder.config.cascade import Setting
from builder.config.environment import versions_overlay
from kbuild_common.errors import ManifestError

SOURCE = "builder/versions.toml"  # kbuild's own table (packaged data), as error messages name it
# tables whose rows an overlay adds or replaces whole: torch's and each backend's toolkit's
TOOLKITS = {b.toolkit_table: b for b in BACKENDS.values() if b.toolkit_table}
ROWS = ("torch", *TOOLKITS)
KEYED = ("default", "cutlass", "sysroot")  # tables whose keys an overlay replaces one by one
_FROM_ENVIRONMENT = object()


@dataclass(frozen=True)
class VersionsTable:
    data: dict  # the merged table, as tomllib parses one
    origins: dict[tuple[str, str], str] = field(default_factory=dict)  # ("torch", "2.16") -> "file:line"
    overlay: Setting | None = None  # the overlay file merged over kbuild's own, and what named it

    def origin(self, table: str, key: str) -> str:
        return self.origins.get((table, key), SOURCE)


def load_versions_table(path: Path | None = None) -> dict:
    """The table, parsed: kbuild's own with the overlay merged over it, or the file at `path` alone
    (tests give their own)."""
    return read_table(path).data


def read_table(path: Path | None = None, overlay=_FROM_ENVIRONMENT) -> VersionsTable:
    """The table with every row's origin. `overlay`: a Setting of the overlay file (default: the
    environment's, through the cascade; None: none). A table given by `path` takes no overlay from
    the environment."""
    if path is not None:
        base_text, base_name = Path(path).read_text(), str(path)
        if overlay is _FROM_ENVIRONMENT:
            overlay = None
    else:
        base_text, base_name = resources.read_text("versions.toml"), SOURCE
        if overlay is _FROM_ENVIRONMENT:
            overlay = versions_overlay()
    data = _parse(base_text, base_name)
    origins = {(t, k): _where(base_text, base_name, t, k) for t in ROWS for k in data.get(t, {})}
    if overlay is None:
        return VersionsTable(data, origins)
    return _merged(data, origins, overlay)


def overlay_text(setting: Setting) -> str:
    """The overlay file's text; a one-line error naming what named it when it cannot be read."""
    try:
        return Path(setting.value).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ManifestError(f"{setting.origin}: {setting.value}: no such file (expected a versions table like "
                            f"{SOURCE}, or unset it)") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ManifestError(f"{setting.origin}: {setting.value}: cannot read it ({e})") from None


def _merged(data: dict, origins: dict, overlay: Setting) -> VersionsTable:
    text, name = overlay_text(overlay), str(overlay.value)
    extra = _parse(text, name)
    # what named the file: " (KBUILD_VERSIONS)", or " (kbuild's config folder)" after its path
    via = overlay.origin[len(name):] if overlay.origin.startswith(name) else f" ({overlay.origin})"
    for table, body in extra.items():
        where = f"{name}: [{table}]"
        if table not in ROWS + KEYED:
            raise ManifestError(f"{where}: unknown table (an overlay may hold {', '.join(ROWS + KEYED)})")
        if not isinstance(body, dict):
            raise ManifestError(f"{where}: expected a table, got {body!r}")
        merged = dict(data.get(table, {}))
        for key, row in body.items():
            if table in ROWS:
                origins[(table, key)] = _where(text, name, table, key) + via
                _check_row(table, key, row, f"{origins[(table, key)]}: [{table}.\"{key}\"]")
            merged[key] = row
        data[table] = merged
    return VersionsTable(data, origins, overlay)


def _check_row(table: str, key: str, row, where: str) -> None:
    if not re.fullmatch(r"\d+\.\d+", key):
        raise ManifestError(f'{where}: expected a release like "2.16" as the key')
    if not isinstance(row, dict):
        raise ManifestError(f"{where}: expected a table, got {row!r}")
    if table == "torch":
        version = row.get("version")
        if not isinstance(version, str) or not re.fullmatch(rf"{re.escape(key)}\.\d+\S*", version):
            raise ManifestError(f'{where} version: expected the exact release, like "{key}.0", got {version!r}')
        required: dict[str, tuple[type, str]] = {name: (list, b.torch_row_list) for name, b in TOOLKITS.items()
                                                 if b.torch_row_requires_list or name in row}
    else:
        required = TOOLKITS[table].toolkit_row
    for name, (kind, expected) in required.items():
        value = row.get(name)
        ok = isinstance(value, str) if kind is str else (
            isinstance(value, list) and all(isinstance(v, str) for v in value))
        if not ok:
            raise ManifestError(f"{where} {name}: expected a {expected}, got {value!r}")


def _parse(text: str, name: str) -> dict:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ManifestError(f"{name}: not a TOML versions table: {e}") from None


def _where(text: str, name: str, table: str, key: str) -> str:
    """`name:line` of the row's header ([torch."2.16"]); `name` when it is written otherwise."""
    header = re.compile(rf"""^\s*\[\s*{table}\s*\.\s*["']?{re.escape(key)}["']?\s*\]""")
    for number, line in enumerate(text.splitlines(), 1):
        if header.match(line):
            return f"{name}:{number}"
    return name
