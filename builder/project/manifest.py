"""A kernel's `build.toml`: found, parsed as TOML and read by the reader of its edition
(builder/project/editions/: kernel-builder's editions 4, 5 and 6) into the one model
(builder/project/model.py), which this module re-exports for the rest of kbuild.

Unknown keys, unknown values and missing required keys are errors; every error is one line:
`file:line: [table] key: what was expected`.
"""

from __future__ import annotations

import re
from pathlib import Path

from builder._toml import tomllib
from builder.project.editions import CURRENT_EDITION, EDITIONS, read
from builder.project.editions.reader import NAME_RE
from builder.project.model import KernelSection, Manifest, NoarchSection, TorchSection, display
from builder.project.toml_lines import key_lines
from kbuild_common.errors import ManifestError

__all__ = ["CURRENT_EDITION", "EDITIONS", "NAME_RE", "KernelSection", "Manifest", "NoarchSection", "TorchSection",
           "check_python_package", "is_kernel_builder_project", "load_manifest", "parse_manifest"]


def load_manifest(path: Path) -> Manifest:
    """Read and validate a kernel's build.toml (a folder or the file itself)."""
    path = Path(path)
    if path.is_dir():
        path = path / "build.toml"
    if not path.is_file():
        raise ManifestError(f"{display(path)}: no build.toml here", hint="run kbuild in a kernel project folder")
    return parse_manifest(path, path.read_text(encoding="utf-8", errors="replace"))


def parse_manifest(path: Path, text: str, notify: bool = True) -> Manifest:
    """Validate `text` as the build.toml at `path` (errors name that file), with the reader of
    its edition; `notify=False` keeps the edition 4 notice back (kbuild update-build reads old
    manifests on purpose)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        line = re.search(r"line (\d+)", str(e))
        loc = f"{display(path)}:{line.group(1)}" if line else display(path)
        reason = re.sub(r" \(at line.*", "", str(e))
        raise ManifestError(f"{loc}: invalid TOML: {reason}") from None
    return read(path, data, key_lines(text), is_kernel_builder_project(path.parent), notify)


def check_python_package(m: Manifest) -> None:
    """The kernel's Python package (torch-ext/<name>/__init__.py) must exist: every variant ships
    it, and without it a variant builds, publishes and only fails when loaded."""
    package = m.root / "torch-ext" / m.python_name
    if not (package / "__init__.py").is_file():
        what = "has no __init__.py" if package.is_dir() else "is missing"
        raise ManifestError(f"{display(package)}/: the kernel's Python package {what} (every variant ships "
                            f"torch-ext/{m.python_name}/, named after [general] name = \"{m.name}\")",
                            hint=f"create torch-ext/{m.python_name}/__init__.py that imports the kernel's ops")


def is_kernel_builder_project(folder: Path) -> bool:
    """A project kernel-builder builds: its flake.nix takes kernel-builder (or its successor, the
    huggingface/kernels flake) as an input. Such projects get kernel-builder's leniency where
    kbuild is stricter (a capability no GPU has is dropped with a warning, not refused)."""
    try:
        flake = (folder / "flake.nix").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return bool(re.search(r"kernel-builder|huggingface/kernels|genKernelFlakeOutputs", flake))
