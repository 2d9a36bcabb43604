"""Which kernel projects a folder names: a kernel's own build.toml, or a workspace's members; and
each of them loaded and checked (`kbuild check`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from builder._toml import tomllib
from builder.project.manifest import Manifest, check_python_package, load_manifest
from builder.project.toml_lines import key_lines
from kbuild_common.errors import ManifestError

_WORKSPACE_KEYS = {"members", "exclude", "matrix", "cache", "dist"}


def kernel_dirs(folder: Path) -> list[Path]:
    """The kernel folders to act on: `folder` itself, or the members of its [workspace]. Every
    error in [workspace] is reported at once, each with its line (`kbuild check` promises that)."""
    manifest = folder / "build.toml"
    if not manifest.is_file():
        raise ManifestError(f"{folder}: no build.toml here", hint="pass a kernel project folder or the repo root")
    text = manifest.read_text()
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return [folder]  # the kernel manifest loader reports the syntax error with its line
    if "workspace" not in data:
        return [folder]
    lines = key_lines(text)

    def error(keys: tuple[str, ...], message: str) -> ManifestError:
        line = lines.get(("workspace", *keys)) or lines.get(("workspace",))
        return ManifestError(f"{manifest}:{line}: {message}" if line else f"{manifest}: {message}", line=line)

    ws = data["workspace"]
    if not isinstance(ws, dict):
        raise error((), f"[workspace]: expected a table, got {ws!r}")
    errors = [error((key,), problem) for key, value in ws.items() if (problem := _key_problem(folder, key, value))]
    excluded = {p.resolve() for pattern in _patterns(ws, "exclude") for p in folder.glob(pattern)}
    dirs = []
    for pattern in _patterns(ws, "members"):
        matched = sorted(p for p in folder.glob(pattern) if (p / "build.toml").is_file())
        if not matched:
            errors.append(error(("members",), f"[workspace] members: \"{pattern}\" matches no kernel folder"))
        dirs += [p for p in matched if p.resolve() not in excluded and p not in dirs]
    if not dirs and not errors:
        errors.append(error(("members",), "[workspace] members: no kernels listed"))
    if errors:
        raise ManifestError.of(sorted(errors, key=lambda e: e.line or 0))
    return dirs


def check_members(folder: Path) -> Iterator[Manifest]:
    """Each member whose build.toml checks, as it is read; once all were read, one ManifestError
    with every error of the others (a bad member does not hide the next one's errors)."""
    errors = []
    for member in kernel_dirs(folder):
        try:
            m = load_manifest(member)
            check_python_package(m)
        except ManifestError as e:
            errors.append(e)
            continue
        yield m
    if errors:
        raise ManifestError.of(errors)


def _key_problem(folder: Path, key: str, value) -> str | None:
    """What is wrong with `[workspace] key = value`, or None."""
    if key not in _WORKSPACE_KEYS:
        return f"[workspace] {key}: unknown key (expected one of: members, exclude, matrix, cache, dist)"
    if key in ("matrix", "cache", "dist"):  # their keys are checked where they are read (matrix, remote_cache, dist)
        return None if isinstance(value, dict) else f"[workspace.{key}]: expected a table, got {value!r}"
    # A bare string would be globbed one character at a time; an absolute or empty
    # pattern makes Path.glob raise.
    if not isinstance(value, list) or not all(isinstance(v, str) and v and not Path(v).is_absolute() for v in value):
        return f"[workspace] {key}: expected a list of glob patterns relative to {folder}, got {value!r}"
    return None


def _patterns(ws: dict, key: str) -> list[str]:
    """The glob patterns of `key`, when they are well-formed (a bad list is reported, not globbed)."""
    value = ws.get(key, [])
    return value if _key_problem(Path("."), key, value) is None else []


def workspace_matrix(folder: Path) -> tuple[dict | None, str]:
    """The `[workspace.matrix]` table of the workspace at `folder` (None if it has none or is a
    kernel), and where to point errors about it."""
    return workspace_table(folder, "matrix")


def workspace_table(folder: Path, table: str) -> tuple[dict | None, str]:
    """`[workspace.<table>]` of the workspace at `folder` (None if it has none, is a kernel, or its
    build.toml does not parse: the build reports that), and where to point errors about it."""
    manifest = folder / "build.toml"
    try:
        data = tomllib.loads(manifest.read_text())
    except (OSError, tomllib.TOMLDecodeError):
        return None, str(manifest)
    ws = data.get("workspace")
    found = ws.get(table) if isinstance(ws, dict) else None
    where = f"{manifest}: [workspace.{table}]"
    if found is not None and not isinstance(found, dict):
        raise ManifestError(f"{where}: expected a table, got {found!r}")
    return found, where


def workspace_url(folder: Path, table: str, key: str, hint: str = "") -> tuple[str, str] | None:
    """The string `[workspace.<table>] <key>` of the workspace at `folder` and where it is written
    (for messages); None when there is none or `folder` is a kernel. Any other key of the table
    is an error naming it."""
    found, where = workspace_table(folder, table)
    if found is None:
        return None
    for name in found:
        if name != key:
            raise ManifestError(f"{where} {name}: unknown key (expected: {key}{hint})")
    if not isinstance(found.get(key), str):
        raise ManifestError(f"{where} {key}: expected a URL string, got {found.get(key)!r}")
    return found[key], f"{where} {key}"
