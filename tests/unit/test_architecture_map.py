"""docs/ARCHITECTURE.md's picture of the code is true: every arrow of its mermaid flowchart is an
import the code makes, and every import between two of its boxes is an arrow, so the map cannot go
stale without this test saying which arrow to add or remove.

The boxes are places: a folder of builder/, `pipeline` (builder/pipeline.py), `ground` (builder's
top-level modules), and the other packages, `kbuild` (the runtime), `kbuild_hub` (the hub service)
and `kbuild_common` (the ground floor builder and kbuild_hub share). The subgraph `builder` stands for all of builder/. Every import counts, those inside
functions and under TYPE_CHECKING too. Two kinds of arrows are left out of the picture, as it
says: a folder of builder/ importing the ground floor (builder's own, or kbuild_common), and one
importing the runtime (the one arrow `builder --> kbuild` stands for the latter)."""

from __future__ import annotations

import ast
import itertools
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ARCHITECTURE = ROOT / "docs" / "ARCHITECTURE.md"
PACKAGES = ("builder", "kbuild", "kbuild_hub", "kbuild_common")
BUILDER = "builder"  # the subgraph that stands for every place of builder/
# what a builder folder may import without an arrow: the floors every folder stands on
UNDRAWN = {"ground", "kbuild", "kbuild_common"}

_NODE = re.compile(r'^(\w+)(?:\["[^"]*"\])?$')
_ARROW = re.compile(r"\s*-->(?:\|[^|]*\|)?\s*")


def builder_places(root: Path = ROOT) -> set[str]:
    """builder/'s folders (those with an __init__.py: templates/ is package data), pipeline, ground."""
    folders = {p.name for p in (root / "builder").iterdir() if (p / "__init__.py").is_file()}
    return folders | {"pipeline", "ground"}


def place(module: str, root: Path = ROOT) -> str | None:
    """The box a module `builder.plan.steps`, `kbuild.hubs`, `kbuild_hub.server.app` is drawn in;
    None for a module of no package of ours."""
    first, *rest = module.split(".")
    if first in ("kbuild", "kbuild_hub", "kbuild_common"):
        return first
    if first != "builder":
        return None
    if rest and (rest[0] == "pipeline" or (root / "builder" / rest[0] / "__init__.py").is_file()):
        return rest[0]
    return "ground"  # builder's top-level modules, and `builder` itself


def _module(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def code_arrows(root: Path = ROOT) -> dict[tuple[str, str], list[str]]:
    """(importing box, imported box) -> the files that make that import."""
    found: dict[tuple[str, str], list[str]] = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            if path.is_relative_to(root / "builder" / "templates"):
                continue  # run by the kernels' own Pythons, not imported: no place of the house
            here_module = _module(path, root)
            here = place(here_module, root)
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                for target in _targets(node, here_module, path.name == "__init__.py"):
                    there = place(target, root)
                    if there is not None and there != here:
                        found.setdefault((here, there), []).append(str(path.relative_to(root)))
    return found


def _targets(node: ast.AST, module: str, is_package: bool) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    if node.level:  # relative: from the importing module's package
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[:len(base) - node.level + 1]
        target = ".".join([*base, node.module] if node.module else base)
    else:
        target = node.module or ""
    # `from builder import proc` names a module; `from builder.plan import steps` stays in plan either way
    return [f"{target}.{alias.name}" for alias in node.names] if target in PACKAGES else [target]


def drawn_arrows(text: str) -> tuple[set[tuple[str, str]], set[str]]:
    """The arrows and boxes of the first mermaid flowchart in `text` (ids, not labels). Understands
    `A --> B`, chains, `A & B --> C`, `-->|label|`, `id["label"]` and subgraphs; any other line
    is an error, so the picture cannot hold what this test does not read."""
    block = re.search(r"```mermaid\n(.*?)```", text, re.S)
    assert block, "docs/ARCHITECTURE.md has no mermaid flowchart"
    arrows, boxes = set(), set()
    for line in block[1].splitlines():
        line = line.strip()
        if not line or line.startswith(("flowchart", "%%")) or line == "end":
            continue
        if line.startswith("subgraph "):
            line = line.removeprefix("subgraph ").strip()
        groups = []
        for part in _ARROW.split(line):
            ids = []
            for item in part.split(" & "):
                m = _NODE.match(item.strip())
                assert m, f"a mermaid line this test cannot read: {line!r}"
                ids.append(m[1])
            groups.append(ids)
        boxes.update(i for ids in groups for i in ids)
        arrows |= {(a, b) for left, right in itertools.pairwise(groups) for a in left for b in right}
    return arrows, boxes


def wrong_arrows(drawn: set[tuple[str, str]], code: dict[tuple[str, str], list[str]],
                 places: set[str]) -> list[str]:
    """What the picture and the code disagree on, one line each."""
    def imports(a: str, b: str) -> bool:
        sources = places if a == BUILDER else {a}
        targets = places if b == BUILDER else {b}
        return any((s, t) in code for s in sources for t in targets)

    wrong = [f"drawn, but no such import: {a} --> {b}" for a, b in sorted(drawn) if not imports(a, b)]
    for (here, there), files in sorted(code.items()):
        if here in places and there in UNDRAWN:  # the floors every folder stands on
            here = BUILDER
            if there == "ground" or (BUILDER, there) in drawn:
                continue
        line = f"not drawn: {here} --> {there}"
        if (here, there) not in drawn and not any(w.startswith(line) for w in wrong):
            wrong.append(f"{line} ({', '.join(sorted(set(files)))})")
    return wrong


def test_every_place_is_a_box_and_every_box_a_place():
    _, boxes = drawn_arrows(ARCHITECTURE.read_text(encoding="utf-8"))
    places = builder_places()
    packages = {BUILDER, "kbuild", "kbuild_hub", "kbuild_common"}
    assert boxes == places | packages, \
        f"boxes with no place: {boxes - places - packages}; places with no box: {places - boxes}"


def test_the_picture_shows_every_import_and_no_other():
    drawn, _ = drawn_arrows(ARCHITECTURE.read_text(encoding="utf-8"))
    wrong = wrong_arrows(drawn, code_arrows(), builder_places())
    assert not wrong, "docs/ARCHITECTURE.md's flowchart and the imports disagree:\n" + "\n".join(wrong)


def test_the_check_sees_a_new_import_a_stale_arrow_and_a_line_it_cannot_read(tmp_path):
    files = {"builder/__init__.py": "", "builder/errors.py": "",
             "builder/plan/__init__.py": "", "builder/plan/steps.py": "from builder import errors\n",
             "builder/project/__init__.py": "",
             "builder/project/manifest.py": "def f():\n    from builder.plan.steps import x\n",  # deferred, drawn?
             "builder/pipeline.py": "from builder.plan import steps\nfrom kbuild.variants import Variant\n",
             "kbuild/__init__.py": "", "kbuild/variants.py": "from .errors import E\n", "kbuild/errors.py": "",
             "kbuild_common/__init__.py": "", "kbuild_common/errors.py": "",
             "kbuild_hub/__init__.py": "from kbuild_common.errors import KbuildError\nfrom kbuild import errors\n"}
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    code = code_arrows(tmp_path)
    assert set(code) == {("project", "plan"), ("pipeline", "plan"), ("pipeline", "kbuild"), ("plan", "ground"),
                         ("kbuild_hub", "kbuild_common"), ("kbuild_hub", "kbuild")}
    picture = ('```mermaid\nflowchart TD\n    subgraph builder["builder/"]\n        pipeline["pipeline.py"] --> plan\n'
               '        plan --> project\n    end\n    builder --> kbuild\n    kbuild_hub --> kbuild_common & kbuild\n```\n')
    drawn, boxes = drawn_arrows(picture)
    assert boxes == {"builder", "pipeline", "plan", "project", "kbuild", "kbuild_hub", "kbuild_common"}
    assert wrong_arrows(drawn, code, builder_places(tmp_path)) == [
        "drawn, but no such import: plan --> project",
        "not drawn: project --> plan (builder/project/manifest.py)"]
    with pytest.raises(AssertionError, match="cannot read"):
        drawn_arrows("```mermaid\nflowchart TD\n    plan -.-> project\n```\n")
