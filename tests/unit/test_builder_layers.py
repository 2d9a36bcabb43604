"""builder/ reads as its pipeline (docs/ARCHITECTURE.md): each stage folder imports only the stages
below it and the ground floor, and the ground floor imports none of them. Every import counts,
those inside functions too (a deferred import is still a dependency)."""

from __future__ import annotations

import ast
from pathlib import Path

BUILDER = Path(__file__).resolve().parents[2] / "builder"
HUB_SERVICE = BUILDER.parent / "kbuild_hub"
# from the top of the pipeline down; stages on one level do not import each other
LEVELS = [("commands",), ("pipeline",), ("publish", "verify"), ("stage",), ("compile",), ("plan",), ("toolchains",),
          ("config",), ("project",), ("hub",), ("backends",), ("ground",)]
RANK = {name: depth for depth, names in enumerate(LEVELS) for name in names}
GROUND = {"errors", "report", "notices", "proc", "layout", "_toml", "resources", "extras", "exports", "__init__",
          "__main__"}


def _place(module: str) -> str:
    """The stage of `builder.<module...>`: its folder, `pipeline`, or `ground` for the top-level modules."""
    first = module.split(".")[0]
    if first in GROUND or first == "":
        return "ground"
    return first


def _imports(root: Path = BUILDER) -> list[tuple[Path, str, str]]:
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        here = "ground" if len(rel.parts) == 1 and rel.stem in GROUND else (rel.stem if len(rel.parts) == 1 else rel.parts[0])
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("builder"):
                target = node.module.removeprefix("builder").lstrip(".")
                if not target:  # `from builder import proc, report`: the names are modules
                    found += [(rel, here, _place(alias.name)) for alias in node.names if alias.name != "__version__"]
                else:
                    found.append((rel, here, _place(target)))
            elif isinstance(node, ast.ImportFrom) and node.level > 0:
                found.append((rel, here, "relative"))
    return found


def test_every_builder_folder_is_a_known_stage():
    folders = {p.name for p in BUILDER.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert folders <= set(RANK), f"a stage not in docs/ARCHITECTURE.md's order: {folders - set(RANK)}"


def _wrong(root: Path = BUILDER) -> list[str]:
    return [f"{rel} ({here}) imports {there}" for rel, here, there in _imports(root)
            if there == "relative" or (here != there and RANK[there] <= RANK[here])]


def test_stages_import_only_what_lies_below_them():
    wrong = _wrong()
    assert not wrong, "\n".join(wrong)


def test_the_check_reports_upward_sideways_and_relative_imports(tmp_path):
    files = {"project/manifest.py": "def f():\n    from builder.commands.main import main\n",  # deferred, upward
             "publish/x.py": "from builder.verify.kernel_tests import run\n",  # same level
             "errors.py": "from builder.plan.planner import ToolchainPlan\n",  # the ground floor importing a stage
             "plan/y.py": "from .steps import plan_build\n",
             "stage/ok.py": "from builder.compile.graph import run_graph\nfrom builder import proc\n"}
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    assert _wrong(tmp_path) == ["errors.py (ground) imports plan", "plan/y.py (plan) imports relative",
                                "project/manifest.py (project) imports commands", "publish/x.py (publish) imports verify"]


def test_subprocesses_run_only_through_proc():
    """docs/ARCHITECTURE.md: `proc.py` is the one place of builder/ that runs subprocesses (it
    traces each command and turns failures and timeouts into one-line errors)."""
    found = []
    for path in sorted([*BUILDER.rglob("*.py"), *HUB_SERVICE.rglob("*.py")]):  # the hub service runs git through it too
        if path == BUILDER / "proc.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            if any(n == "subprocess" or n.startswith("subprocess.") for n in names):
                found.append(str(path.relative_to(BUILDER.parent)))
    assert not found, f"subprocess imported outside proc.py: {found}"


def _absolute_imports(root: Path) -> list[tuple[str, str]]:
    """(file relative to root's parent, module) of every absolute import under `root`."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            modules = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else []
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module == "builder":
                modules = [f"builder.{a.name}" for a in node.names]
            found += [(str(path.relative_to(root.parent)), m) for m in modules]
    return found


def test_the_hub_service_is_its_own_package_on_builders_ground_floor():
    """docs/ARCHITECTURE.md: kbuild_hub/ (the service) imports builder's ground floor and nothing
    else of it; of builder/, only `kbuild hub serve` starts its server, and publishing reaches it
    as a client (a local store through its gitstore, or HTTP)."""
    wrong = [f"{f} imports {m}" for f, m in _absolute_imports(HUB_SERVICE)
             if m.startswith("builder.") and m.split(".")[1] not in GROUND]
    assert not wrong, "\n".join(wrong)
    serving = sorted({f for f, m in _absolute_imports(BUILDER) if m.startswith(("kbuild_hub.server", "kbuild_hub.pages"))})
    assert serving == ["builder/commands/hub.py"], serving
