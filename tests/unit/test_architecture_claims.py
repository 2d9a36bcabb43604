"""docs/ARCHITECTURE.md's checkable claims about builder/, held by reading the code (the picture's arrows are
held by test_architecture_map.py, the floors by test_builder_layers.py, the runtime's dependencies by
tests/integration/test_runtime_dependencies.py):

- `commands/`: no command imports another (they share `arguments.py`; `main.py` assembles them);
- `config/environment.py` holds every environment variable the builder reads: no other module reads os.environ;
- `report.py` is the one object that writes to the terminal: no other module prints, writes to sys.stdout or
  sys.stderr, or makes a rich Console; `commands/main.py` alone prints, the one line of an error raised before
  any Reporter exists or when rich itself is missing.
The scripts of templates/ run in other Pythons (the suites', a probed torch's) and are left out.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

BUILDER = Path(__file__).resolve().parents[2] / "builder"
COMMANDS = BUILDER / "commands"
SHARED_BY_COMMANDS = {"arguments"}  # what several commands share
ENVIRONMENT = BUILDER / "config" / "environment.py"
REPORTER = BUILDER / "report.py"
PRINTS_WITHOUT_A_REPORTER = {COMMANDS / "main.py"}


@cache
def modules() -> list[tuple[Path, ast.AST]]:
    return [(p, ast.parse(p.read_text(encoding="utf-8"), str(p))) for p in sorted(BUILDER.rglob("*.py"))
            if "templates" not in p.relative_to(BUILDER).parts]


def imported(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
        return [f"{node.module}.{a.name}" for a in node.names] + [node.module]
    return []


def commands_imported_by_commands(found: list[tuple[Path, ast.AST]]) -> list[str]:
    wrong = []
    for path, tree in found:
        if path.parent != COMMANDS or path.stem in ("main", "__init__", *SHARED_BY_COMMANDS):
            continue
        for node in ast.walk(tree):
            for name in imported(node):
                parts = name.split(".")
                if parts[:2] == ["builder", "commands"] and len(parts) > 2 and parts[2] not in SHARED_BY_COMMANDS:
                    wrong.append(f"{path.name}:{node.lineno} imports {name}")
    return sorted(set(wrong))


def environment_reads(found: list[tuple[Path, ast.AST]]) -> list[str]:
    return [f"{path.relative_to(BUILDER.parent)}:{node.lineno}" for path, tree in found if path != ENVIRONMENT
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv")
            and isinstance(node.value, ast.Name) and node.value.id == "os"]


def terminal_writes(found: list[tuple[Path, ast.AST]]) -> list[str]:
    wrong = []
    for path, tree in found:
        if path == REPORTER or path in PRINTS_WITHOUT_A_REPORTER:
            continue
        for node in ast.walk(tree):
            printed = isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print"
            stream = (isinstance(node, ast.Attribute) and node.attr in ("stdout", "stderr")
                      and isinstance(node.value, ast.Name) and node.value.id == "sys")
            console = isinstance(node, ast.Name) and node.id == "Console"
            if printed or stream or console:
                wrong.append(f"{path.relative_to(BUILDER.parent)}:{node.lineno}")
    return wrong


def test_no_command_imports_another():
    assert commands_imported_by_commands(modules()) == []


def test_only_config_environment_reads_the_environment():
    assert environment_reads(modules()) == []


def test_only_the_reporter_writes_to_the_terminal():
    assert terminal_writes(modules()) == []


def test_the_checks_see_what_they_look_for(tmp_path):
    """Each check finds its fault in a module written for it."""
    text = ("import os\nimport sys\nfrom builder.commands.build import run\nfrom builder.commands import arguments\n"
            "def f():\n    print(os.environ['X'], file=sys.stderr)\n")
    found = [(COMMANDS / "lock.py", ast.parse(text))]
    assert commands_imported_by_commands(found) == ["lock.py:3 imports builder.commands.build",
                                                   "lock.py:3 imports builder.commands.build.run"]
    assert environment_reads(found) == ["builder/commands/lock.py:6"]
    assert terminal_writes(found) == ["builder/commands/lock.py:6", "builder/commands/lock.py:6"]
