"""What makes a test slow, declared once: tests/conftest.py marks a test `slow` when it uses one of
these, read from its module's source (the test, the same-module functions it calls and the
same-module fixtures it asks for). A test never carries a hand-written `slow` mark.

Slow is minutes, or tens of seconds on 2 cores: a real compile (g++, nvcc, ninja), a toolchain or
torch provisioned by pip, a server process started (redis, sccache-dist) or a venv made."""

from __future__ import annotations

import ast
import inspect
import sys
from functools import cache
from pathlib import Path

# Fixtures, by name (wherever they are defined), and why each is slow.
FIXTURES = {
    "torch213_python": "provisions torch 2.13.0 with pip into a toolchain store (minutes cold)",
    "toolchains": "installs the glibc 2.28 sysroot toolchain (tests/integration/test_sysroot.py)",
    "plain": "builds kbuild's wheel and installs it into a fresh venv (test_plain_install.py)",
    "cuda_corpus": "the corpus kernels planned for CUDA: CUTLASS headers fetched, units preprocessed by nvcc",
}

# Helper functions, by module and name, and why each is slow.
HELPERS = {
    "sccache_dist.sccache_dist": "starts an sccache-dist scheduler and build servers (bubblewrap) and compiles there",
    "redis_server.redis_server": "starts redis-server as the shared compile cache; its tests build twice",
    "hf_envs.ensure": "makes the Hugging Face venvs (kernels on torch 2.13 or torch 2.15's own, minutes)",
    "test_fanout.run_slices": "builds and publishes each slice of the matrix in its own kbuild process (~150 s)",
    "test_quick_start.run_quick_start": "runs the README's quick start: builds, publishes and loads a kernel",
    "seen_kernel.build_seen": "builds the seen kernel's noarch variants with kbuild build",
}

# Attributes, by name (of an object the test made), and why using each is slow.
ATTRIBUTES = {
    "torch_python": "ToolchainStore.torch_python provisions a torch release with pip",
    "compiler": "runs a compile unit's own compiler (nvcc, g++) on real sources",
}

# The CLI commands that compile or provision, run in-process (`main([...])`) or as a process
# through a same-module helper that runs kbuild.
COMMANDS = {
    ("build",): "compiles a kernel with real g++/nvcc and ninja",
    ("toolchain", "install"): "downloads and unpacks a toolchain (pip wheels)",
}
# pip, run as a process: a fresh environment or a downloaded wheel.
PIP = {"install": "installs packages into a fresh environment",
       "download": "downloads a torch wheel (its headers, to compile against them)"}
KBUILD_MAIN = "builder.commands.main.main"


def slow_reason(function, fixturenames) -> str | None:
    """Why the test `function` (asking for `fixturenames`) is slow, or None."""
    for name in fixturenames:
        if name in FIXTURES:
            return f"fixture {name}: {FIXTURES[name]}"
    module = sys.modules.get(function.__module__)
    path = inspect.getsourcefile(function) if module else None
    if not path:
        return None
    defs = _top_level_functions(path)
    namespace = vars(module)
    seen: set[str] = set()
    todo = [function.__name__, *(n for n in fixturenames if n in defs)]
    while todo:
        name = todo.pop()
        if name in seen or name not in defs:
            continue
        seen.add(name)
        node = defs[name]
        nested = {f.name: f for f in ast.walk(node) if isinstance(f, ast.FunctionDef) and f is not node}
        reason = _reason_in(node, {**namespace, **_local_imports(node)}, {**defs, **nested})
        if reason:
            return reason
        todo.extend(n.id for n in ast.walk(node) if isinstance(n, ast.Name) and n.id in defs)
    return None


@cache
def _top_level_functions(path: str) -> dict[str, ast.FunctionDef]:
    tree = ast.parse(Path(path).read_text(encoding="utf-8"), path)
    found = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            found.update({f.name: f for f in node.body if isinstance(f, ast.FunctionDef)})
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found[node.name] = node
    return found


class _Imported:
    """A name a function imports in its body (`from builder.commands.main import main`)."""

    def __init__(self, module: str, name: str):
        self.__module__, self.__qualname__ = module, name


def _local_imports(node: ast.AST) -> dict:
    return {alias.asname or alias.name: _Imported(n.module, alias.name)
            for n in ast.walk(node) if isinstance(n, ast.ImportFrom) and n.module for alias in n.names}


def _qualified(target) -> str:
    return f"{getattr(target, '__module__', '')}.{getattr(target, '__qualname__', '')}"


def _reason_in(node: ast.AST, namespace: dict, defs: dict) -> str | None:
    for n in ast.walk(node):
        target = None
        if isinstance(n, ast.Name):
            target = namespace.get(n.id)
        elif isinstance(n, ast.Attribute):
            if n.attr in ATTRIBUTES:
                return f".{n.attr}: {ATTRIBUTES[n.attr]}"
            if isinstance(n.value, ast.Name):
                target = getattr(namespace.get(n.value.id), n.attr, None)
        if target is not None and _qualified(target) in HELPERS:
            return f"{_qualified(target)}: {HELPERS[_qualified(target)]}"
        if isinstance(n, (ast.List, ast.Tuple)):
            words = _words(n.elts)
            for i, word in enumerate(words[:-1]):
                if word == "pip" and words[i + 1] in PIP:
                    return f"pip {words[i + 1]}: {PIP[words[i + 1]]}"
        if isinstance(n, ast.Call) and _runs_kbuild(n.func, namespace, defs):
            args = n.args[0].elts if n.args and isinstance(n.args[0], (ast.List, ast.Tuple)) else n.args
            words = _words(args[:4])
            for command, why in COMMANDS.items():
                # the command comes first, or after one value (capsys, a kbuild path)
                if any(tuple(words[i:i + len(command)]) == command for i in (0, 1)):
                    return f"kbuild {' '.join(command)}: {why}"
    return None


def _words(nodes) -> list[str]:
    return [a.value if isinstance(a, ast.Constant) and isinstance(a.value, str) else "" for a in nodes]


def _runs_kbuild(func: ast.AST, namespace: dict, defs: dict, depth: int = 0) -> bool:
    """`func` is kbuild's main, or a same-module helper that calls it or runs kbuild as a process."""
    if not isinstance(func, ast.Name):
        return False
    if _qualified(namespace.get(func.id)) == KBUILD_MAIN:
        return True
    helper = defs.get(func.id)
    if helper is None or depth > 3:
        return False
    for n in ast.walk(helper):
        if isinstance(n, ast.Constant) and n.value in ("builder.commands.main", "kbuild"):
            return True
        if isinstance(n, ast.Name) and ("kbuild" in n.id.lower() or
                                        _runs_kbuild(n, namespace, defs, depth + 1) and n.id != func.id):
            return True
    return False
