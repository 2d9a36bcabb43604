"""The repo card (README.md on main): the kernel's CARD.md if it has one, else the template."""

from __future__ import annotations

import re
from pathlib import Path

from builder import resources
from builder.project.manifest import Manifest
from builder.publish.pyapi import class_names, docstring, public_names


def render_card(manifest: Manifest, repo_id: str, branch: str, variants) -> str:
    own = manifest.root / "CARD.md"
    template = own.read_text() if own.is_file() else resources.read_text("templates/CARD.md.in")
    package = manifest.root / "torch-ext" / manifest.python_name
    values = {
        "name": manifest.name, "python_name": manifest.python_name, "repo_id": repo_id, "branch": branch,
        "pin": _pin(branch),
        "license": manifest.license or "other",
        "description": docstring(_read(package / "__init__.py")) or f"The `{manifest.name}` kernel.",
        "functions": _bullets((public_names(_read(package / "__init__.py")) or set()) - {"layers"}),
        "layers": _bullets(class_names(_read(package / "layers.py"))
                           | class_names(_read(package / "layers" / "__init__.py"))),
        "variants": "\n".join(_variant_row(v) for v in variants),
    }
    # A kernel's own CARD.md may use any subset of the placeholders.
    return template.format_map(_Defaulting(values))


class _Defaulting(dict):
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def _pin(branch: str) -> str:
    """get_kernel's pin for `branch`, in the words both loaders take: Hugging Face's reads no
    `org/name@v1`, and both read `version=1` (or `revision=` for any other branch)."""
    match = re.fullmatch(r"v(\d+)", branch)
    return f"version={match.group(1)}" if match else f"revision={branch!r}"


def _variant_row(v) -> str:
    backend = v.metadata.get("backend") or {}
    archs = ", ".join(backend.get("archs") or []) or "—"
    return f"| `{v.name}` | {backend.get('type', '?')} | {archs} |"


def _read(path: Path) -> str:
    return path.read_text() if path.is_file() else ""


def _bullets(names: set[str]) -> str:
    return "\n".join(f"- `{n}`" for n in sorted(names)) or "(none)"
