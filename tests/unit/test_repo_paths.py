"""Every repository path goes through kbuild/repo_layout.py: no module of the packages spells a
`build/…` path by hand (the zip layout and the signatures' move showed what a second spelling
costs). A path composed in an f-string (`f"build/{variant}/…"`, `f"… build/{variant}"` in a
message) or written whole (`"build/"`) fails this; prose that mentions build/ does not."""

from __future__ import annotations

import ast
import re
from itertools import pairwise
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("kbuild", "kbuild_hub", "builder")
LAYOUT = ROOT / "kbuild" / "repo_layout.py"
# "build/" at the start of a literal piece or after a separator: not "kbuild/" or ".build/"
ENDS_IN_BUILD = re.compile(r"(?:^|[\s/'\"(@:])build/$")
WHOLE_PATH = re.compile(r"build/\S*")


def docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def hand_written_paths(path: Path, root: Path = ROOT) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    skip = docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            pieces = node.values
            for piece, after in pairwise(pieces):
                if isinstance(piece, ast.Constant) and isinstance(after, ast.FormattedValue) \
                        and ENDS_IN_BUILD.search(piece.value):
                    found.append(f"{path.relative_to(root)}:{node.lineno}: f-string composes build/{{…}}")
            skip |= {id(p) for p in pieces}
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip \
                and WHOLE_PATH.fullmatch(node.value):
            found.append(f"{path.relative_to(root)}:{node.lineno}: {node.value!r}")
    return found


def test_no_module_spells_a_build_path_by_hand():
    files = [p for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py")) if p != LAYOUT]
    assert len(files) > 100
    found = [line for p in files for line in hand_written_paths(p)]
    assert not found, "use kbuild/repo_layout.py's functions (variant_folder, metadata_file, repo_path, …):\n" + \
        "\n".join(found)


def test_the_check_catches_each_spelling(tmp_path):
    source = tmp_path / "example.py"
    source.write_text('a = f"build/{v}/metadata.json"\nb = f"{repo}@{c} build/{v}"\nc = f"{r}/build/{v}"\n'
                      'd = "build/"\ne = "no build/ folder here"\nf = f"{home}/.cache/kbuild/{x}"\n')
    found = hand_written_paths(source, tmp_path)
    assert [line.split(":")[1] for line in found] == ["1", "2", "3", "4"]
