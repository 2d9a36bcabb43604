"""kbuild_hub/ reads as floors too (docs/ARCHITECTURE.md, "The hub service"): the server stands on
the pages and the upstream cache, and all three on the package's top-level modules (the store,
its errors, the route declaration); no part imports one above it or beside it, so no arrow runs
both ways. Every import counts, deferred ones too."""

from __future__ import annotations

import ast
from pathlib import Path

HUB_SERVICE = Path(__file__).resolve().parents[2] / "kbuild_hub"
# from the top down; parts on one level do not import each other
LEVELS = [("server",), ("pages", "upstream"), ("ground",)]
RANK = {name: depth for depth, names in enumerate(LEVELS) for name in names}


def _part(root: Path, module: str) -> str:
    """The part of `kbuild_hub.<module...>`: its folder, or `ground` for the top-level modules."""
    first = module.split(".")[0]
    return first if (root / first / "__init__.py").is_file() else "ground"


def _wrong(root: Path = HUB_SERVICE) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        here = rel.parts[0] if len(rel.parts) > 1 else "ground"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level > 0:
                found.append(f"{rel} ({here}) imports relative")
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("kbuild_hub."):
                there = _part(root, node.module.removeprefix("kbuild_hub."))
                if here != there and RANK[there] <= RANK[here]:
                    found.append(f"{rel} ({here}) imports {there}")
    return found


def test_every_part_of_the_hub_service_is_on_a_floor():
    parts = {p.name for p in HUB_SERVICE.iterdir() if (p / "__init__.py").is_file()}
    assert parts <= set(RANK), f"a part of kbuild_hub/ on no floor: {parts - set(RANK)}"


def test_the_hub_services_parts_import_only_what_lies_below_them():
    wrong = _wrong()
    assert not wrong, "\n".join(wrong)


def test_the_check_reports_upward_and_sideways_imports(tmp_path):
    files = {"pages/__init__.py": "", "upstream/__init__.py": "", "server/__init__.py": "",
             "pages/routes.py": "from kbuild_hub.server.routing import Route\n",  # upward
             "upstream/cache.py": "def f():\n    from kbuild_hub.pages.model import Catalog\n",  # beside it, deferred
             "gitstore.py": "from kbuild_hub.upstream.policy import UpstreamPolicy\n",  # the ground importing a part
             "server/app.py": "from kbuild_hub.pages.routes import PAGE_ROUTES\nfrom kbuild_hub.route import Route\n"}
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    assert _wrong(tmp_path) == ["gitstore.py (ground) imports upstream", "pages/routes.py (pages) imports server",
                                "upstream/cache.py (upstream) imports pages"]
