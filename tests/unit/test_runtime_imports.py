"""The runtime's import graph: no module of kbuild/ imports, directly or through others, one that
imports it back, counting imports inside functions too (a deferred import that closes a circle is
still a circle: the two modules cannot be understood, or loaded, one without the other). And
`import kbuild` stays light: no torch, no huggingface_hub, nothing of the builder.
"""

from __future__ import annotations

import ast
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


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """One cycle through each strongly connected part that has one (Tarjan, then a path back)."""
    index, low, stack, on, parts = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = set()
            while True:
                w = stack.pop()
                on.discard(w)
                part.add(w)
                if w == v:
                    break
            if len(part) > 1:
                parts.append(part)

    for v in sorted(edges):
        if v not in index:
            visit(v)
    found = []
    for part in parts:
        start = min(part)
        path, seen, node = [start], {start}, start
        while True:  # walk inside the part until a module repeats: that loop is a cycle
            node = min(w for w in edges[node] if w in part)
            if node in seen:
                found.append(path[path.index(node):] + [node])
                break
            path.append(node)
            seen.add(node)
    return found


def test_the_cycle_finder_finds_a_deferred_circle():
    # what kbuild had before issue 24: local -> hub_loader (inside a function) -> local
    assert cycles({"kbuild.local": {"kbuild.hub_loader"}, "kbuild.hub_loader": {"kbuild.local", "kbuild.cache"},
                   "kbuild.cache": set()}) == [["kbuild.hub_loader", "kbuild.local", "kbuild.hub_loader"]]


def test_the_runtime_has_no_import_circle():
    edges = graph()
    assert "kbuild.hubs.base" in edges and "kbuild.loading" in edges["kbuild.hub_loader"]  # the graph is read
    assert cycles(edges) == []


def test_the_hub_interface_imports_no_reader():
    reachable, todo = set(), ["kbuild.hubs.base"]
    edges = graph()
    while todo:
        for w in edges[todo.pop()] - reachable:
            reachable.add(w)
            todo.append(w)
    assert not reachable & {"kbuild.hubs.http", "kbuild.hubs.local_git", "kbuild.hubs"}, reachable
