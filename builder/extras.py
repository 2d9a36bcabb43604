"""What a plain `pip install kbuild` lacks for the builder, and the one line that says how to add it.

`pip install kbuild` installs the runtime (`import kbuild`: packaging only); the builder's
libraries (rich, auditwheel, ninja, ...) are the `build` extra. The list comes from kbuild's own
metadata (else the checkout's pyproject.toml), so it never drifts from what pyproject.toml asks
for. Only the standard library and packaging are imported here: this runs when the rest cannot.
"""

from __future__ import annotations

import importlib.metadata as metadata
import importlib.util
import json
import sys
from pathlib import Path
from urllib.parse import unquote, urlsplit

from packaging.requirements import InvalidRequirement, Requirement

if sys.version_info >= (3, 11):  # 3.10 has no tomllib, and tomli is in the extra that may be missing
    import tomllib

EXTRA = "build"
DIST = "kbuild"
_CHECKOUT = Path(__file__).resolve().parent.parent


def missing_requirements(extra: str = EXTRA) -> list[str]:
    """The distributions of kbuild's `extra` (for this Python) that are not installed."""
    missing = []
    for text in _requirements():
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        if req.marker is None or not req.marker.evaluate({"extra": extra}):
            continue  # the runtime's own, another extra's, or not for this Python
        try:
            metadata.version(req.name)
        except metadata.PackageNotFoundError:
            missing.append(req.name)
    return missing


def _requirements() -> list[str]:
    try:
        return metadata.requires(DIST) or []
    except metadata.PackageNotFoundError:  # run from a checkout that was never installed
        return _checkout_requirements()


def _checkout_requirements() -> list[str]:
    pyproject = _CHECKOUT / "pyproject.toml"
    if sys.version_info < (3, 11) or not pyproject.is_file():
        return []
    else:  # a branch of the version check: type checkers for 3.10 then know it needs no tomllib
        project = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {})
        return [f'{r}{";" if ";" not in r else " and"} extra == "{name}"'
                for name, reqs in project.get("optional-dependencies", {}).items() for r in reqs]


def install_command(extra: str = EXTRA) -> str:
    """How to add `extra` to this environment's kbuild: from the folder or wheel it was installed
    from when that is still there (a checkout: the path form), else from the package index."""
    target, editable = f'"{DIST}[{extra}]"', False
    source = _installed_from()
    if source is not None and source[0].exists():
        target, editable = f'"{source[0]}[{extra}]"', source[1]
    return f"{sys.executable} -m pip install {'-e ' if editable else ''}{target}"


def _installed_from() -> tuple[Path, bool] | None:
    """(folder or wheel, editable) from PEP 610's direct_url.json; the checkout itself when kbuild
    is not installed at all; None when it came from an index."""
    try:
        dist = metadata.distribution(DIST)
    except metadata.PackageNotFoundError:
        return (_CHECKOUT, True) if (_CHECKOUT / "pyproject.toml").is_file() else None
    try:
        record = json.loads(dist.read_text("direct_url.json") or "null")
    except ValueError:
        return None
    if record is None and Path(str(dist.locate_file(""))).resolve() == _CHECKOUT:
        return _CHECKOUT, True  # the checkout's own kbuild.egg-info, on sys.path
    if not isinstance(record, dict) or not str(record.get("url", "")).startswith("file://"):
        return None
    path = Path(unquote(urlsplit(record["url"]).path))
    return path, bool((record.get("dir_info") or {}).get("editable"))


def missing_extra_message(error: ModuleNotFoundError, command: str) -> str | None:
    """The one line for `error`, raised running `command`, when it is the build extra that is
    missing; None when it is not (all of it installed, or the module is there after all)."""
    missing = missing_requirements()
    module = (error.name or "").split(".")[0]
    if not missing or not module or importlib.util.find_spec(module) is not None:
        return None
    return (f"{command} needs the builder's libraries, kbuild's `{EXTRA}` extra (not installed: "
            f"{', '.join(missing)}): {install_command()}")
