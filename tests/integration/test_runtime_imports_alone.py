"""Every runtime module imports alone and light, each in a fresh interpreter."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

RUNTIME = Path(__file__).resolve().parents[2] / "kbuild"


def module_name(path: Path) -> str:
    parts = path.relative_to(RUNTIME.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, modules: set[str]) -> set[str]:
    """The kbuild modules `path` imports anywhere in it (relative imports resolved; `from . import
    x` counts as module `x` when there is one)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            submodules = {f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in modules}
            # `from . import fit` imports the module fit; the package itself only as any parent is
            found |= submodules if len(submodules) == len(node.names) else submodules | {target}
    return {m for m in found if m in modules and m != name}


def graph() -> dict[str, set[str]]:
    files = sorted(RUNTIME.rglob("*.py"))
    modules = {module_name(p) for p in files}
    return {module_name(p): imports_of(p, modules) for p in files}


def test_every_runtime_module_imports_alone_and_light():
    """Each module in a fresh interpreter of its own: none needs another to have been imported
    first, and none pulls in torch, huggingface_hub or the builder by being imported (the HTTP
    reader imports huggingface_hub when it makes its first request)."""
    probe = ("import importlib, sys; importlib.import_module(sys.argv[1]); heavy = {'torch', 'huggingface_hub', "
             "'builder'}; print(' '.join(sorted({m.split('.')[0] for m in sys.modules} & heavy)))")
    for name in sorted(graph()):
        done = subprocess.run([sys.executable, "-c", probe, name], capture_output=True, text=True)
        assert done.returncode == 0, f"{name}: {done.stderr.strip().splitlines()[-1:]}"
        assert done.stdout.strip() == "", f"importing {name} imports {done.stdout.strip()}"
