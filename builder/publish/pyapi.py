"""Read a kernel package's public API from its source, without importing it."""

from __future__ import annotations

import ast


def public_names(source: str) -> set[str] | None:
    """The literal `__all__` of a module's source; None when it has none (or is not Python)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
            try:
                return set(ast.literal_eval(node.value))
            except ValueError:
                return None
    return None


def class_names(source: str) -> set[str]:
    """Top-level public classes (the layers of a `layers` module)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    return {n.name for n in tree.body if isinstance(n, ast.ClassDef) and not n.name.startswith("_")}


def docstring(source: str) -> str | None:
    try:
        return ast.get_docstring(ast.parse(source))
    except SyntaxError:
        return None
