"""bench/ uses builder only through what its folders offer: every `from builder... import NAME` in
bench/ names a package of builder (builder itself or one of its folders) and a NAME of that
package's `__all__` (docs/ARCHITECTURE.md), so refactoring the modules inside a folder cannot break a
benchmark silently; and every such name still exists, so a renamed entry point fails here rather
than months later in a benchmark."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def builder_packages(root: Path = ROOT) -> list[str]:
    """`builder` and each folder of builder/ that is a package (templates/ is package data)."""
    folders = sorted(p.name for p in (root / "builder").iterdir() if (p / "__init__.py").is_file())
    return ["builder", *(f"builder.{name}" for name in folders)]


def offered(package: str) -> list[str]:
    return list(getattr(importlib.import_module(package), "__all__", []))


def wrong_imports(bench: Path, packages: list[str], offers=offered) -> list[str]:
    """One line per import of builder in bench/ that is not a public name: file:line and why."""
    wrong = []
    for path in sorted(bench.rglob("*.py")):
        where = path.relative_to(bench.parent)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == "builder":
                        wrong.append(f"{where}:{node.lineno}: import {alias.name}: import the names a folder "
                                     f"offers instead (from builder.FOLDER import NAME)")
            elif isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] == "builder":
                if node.module not in packages:
                    names = ", ".join(alias.name for alias in node.names)
                    wrong.append(f"{where}:{node.lineno}: from {node.module} import {names}: {node.module} is not "
                                 f"builder or a folder of it; import what its folder lists in __all__")
                    continue
                public = offers(node.module)
                wrong += [f"{where}:{node.lineno}: {node.module} does not offer {alias.name} (its __all__: "
                          f"{', '.join(public) or 'none'})" for alias in node.names if alias.name not in public]
    return wrong


def test_bench_imports_only_the_names_builder_folders_offer():
    wrong = wrong_imports(ROOT / "bench", builder_packages())
    assert not wrong, "bench/ imports builder internals:\n" + "\n".join(wrong)


@pytest.mark.parametrize("package", builder_packages())
def test_every_offered_name_exists(package):
    module = importlib.import_module(package)
    missing = [name for name in offered(package) if not hasattr(module, name)]
    assert not missing, f"{package}.__all__ names what it no longer has: {', '.join(missing)}"


def test_the_check_names_each_private_import(tmp_path):
    bench = tmp_path / "bench"
    (bench / "gpu").mkdir(parents=True)
    (bench / "ok.py").write_text("import os\nfrom builder.plan import plan_kernels\nfrom kbuild.variants import x\n")
    (bench / "gpu" / "deep.py").write_text("def f():\n    from builder.plan.steps import _FLAGS\n")
    (bench / "other.py").write_text("import builder.plan.matrix\nfrom builder.plan import plan_kernels, _private\n")
    offers = {"builder.plan": ["plan_kernels"]}.get
    assert wrong_imports(bench, ["builder", "builder.plan"], offers) == [
        "bench/gpu/deep.py:2: from builder.plan.steps import _FLAGS: builder.plan.steps is not builder or a folder "
        "of it; import what its folder lists in __all__",
        "bench/other.py:1: import builder.plan.matrix: import the names a folder offers instead "
        "(from builder.FOLDER import NAME)",
        "bench/other.py:2: builder.plan does not offer _private (its __all__: plan_kernels)"]
