"""`kbuild check`: each kernel of a folder (one, or a workspace's members) loaded and checked."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from builder.errors import ManifestError
from builder.project.manifest import Manifest, check_python_package, load_manifest
from builder.project.workspace import kernel_dirs


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
