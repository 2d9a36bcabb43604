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


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def export_mismatches(root: Path = ROOT) -> list[str]:
    """One line per (name, module) pair that a package of builder/ maps in its lazy_exports call but
    does not import under `if TYPE_CHECKING:`, or the other way round. mypy cannot see through the
    module `__getattr__` lazy_exports returns (every name would be Any to it, and bench/'s calls
    unchecked), so the TYPE_CHECKING block is what it reads: it must name exactly what run time offers."""
    wrong = []
    for init in sorted((root / "builder").rglob("__init__.py")):
        tree = ast.parse(init.read_text(encoding="utf-8"))
        calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call)
                 and isinstance(node.func, ast.Name) and node.func.id == "lazy_exports"]
        if not calls:
            continue
        package = ".".join(init.parent.relative_to(root).parts)
        lazy = {(name, f"{package}.{kw.arg}") for call in calls for kw in call.keywords
                for name in ast.literal_eval(kw.value)}
        typed = {(alias.name if alias.asname in (None, alias.name) else f"{alias.name} as {alias.asname}",
                  node.module or "")
                 for block in tree.body if isinstance(block, ast.If) and _is_type_checking(block.test)
                 for node in ast.walk(block) if isinstance(node, ast.ImportFrom) for alias in node.names}
        where = init.relative_to(root)
        wrong += [f"{where}: lazy_exports offers {name} from {module}; `if TYPE_CHECKING:` does not import it"
                  for name, module in sorted(lazy - typed)]
        wrong += [f"{where}: `if TYPE_CHECKING:` imports {name} from {module}; lazy_exports does not offer it"
                  for name, module in sorted(typed - lazy)]
    return wrong


def test_mypy_sees_the_names_lazy_exports_offers():
    wrong = export_mismatches()
    assert not wrong, "\n".join(wrong)


def test_the_check_names_each_difference_between_the_two(tmp_path):
    files = {"builder/__init__.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                    "    from builder.report import Reporter as Reporter\n"
                                    "__all__, __getattr__ = lazy_exports(__name__, report=('Reporter',))\n",
             "builder/plan/__init__.py": "import typing\nif typing.TYPE_CHECKING:\n"
                                         "    from builder.plan.matrix import select as select, Target\n"
                                         "    from builder.plan.steps import plan_kernels as plan_kernels\n"
                                         "    from builder.plan.matrix import load_table as table\n"
                                         "__all__, __getattr__ = lazy_exports(__name__, planner=('plan_kernels',),\n"
                                         "    matrix=('Target', 'load_table', 'select', 'variant_archs'))\n",
             "builder/hub/__init__.py": "__all__, __getattr__ = lazy_exports(__name__, open=('open_hub',))\n",
             "builder/project/__init__.py": "from builder.project.manifest import load_manifest\n"}  # not lazy: ignored
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    assert export_mismatches(tmp_path) == [
        "builder/hub/__init__.py: lazy_exports offers open_hub from builder.hub.open; `if TYPE_CHECKING:` does not "
        "import it",
        "builder/plan/__init__.py: lazy_exports offers load_table from builder.plan.matrix; `if TYPE_CHECKING:` does "
        "not import it",
        "builder/plan/__init__.py: lazy_exports offers plan_kernels from builder.plan.planner; `if TYPE_CHECKING:` "
        "does not import it",
        "builder/plan/__init__.py: lazy_exports offers variant_archs from builder.plan.matrix; `if TYPE_CHECKING:` "
        "does not import it",
        "builder/plan/__init__.py: `if TYPE_CHECKING:` imports load_table as table from builder.plan.matrix; "
        "lazy_exports does not offer it",
        "builder/plan/__init__.py: `if TYPE_CHECKING:` imports plan_kernels from builder.plan.steps; lazy_exports "
        "does not offer it"]
