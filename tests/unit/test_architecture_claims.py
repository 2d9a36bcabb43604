"""docs/ARCHITECTURE.md's checkable claims about builder/, held by reading the code (the picture's arrows are
held by test_architecture_map.py, the floors by test_builder_layers.py, the runtime's dependencies by
tests/integration/test_runtime_dependencies.py):

- `commands/`: no command imports another (they share `arguments.py`; `main.py` assembles them);
- `config/environment.py` holds every environment variable the builder reads: no other module reads os.environ;
- `report.py` is the one object that writes to the terminal: no other module prints, writes to sys.stdout or
  sys.stderr, or makes a rich Console; `commands/main.py` alone prints, the one line of an error raised before
  any Reporter exists or when rich itself is missing;
- the planner, the matrix, the versions reader, the torch probe, the dependency resolver, the compile graph, the
  toolchain record and `kbuild reproduce` ask the backends' table, never `backend == "cuda"`: none of them compares
  anything with a backend's name;
- the toolchain store and the link check name no backend: how CUDA's toolkit is installed, what torch's CUDA build
  is and which libraries only CUDA's driver installs, the CUDA backend says (builder/backends/cuda.py, cuda_wheels.py).
The scripts of templates/ run in other Pythons (the suites', a probed torch's) and are left out.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

BUILDER = Path(__file__).resolve().parents[2] / "builder"
COMMANDS = BUILDER / "commands"
SHARED_BY_COMMANDS = {"arguments"}  # what several commands share
ENVIRONMENT = BUILDER / "config" / "environment.py"
REPORTER = BUILDER / "report.py"
PRINTS_WITHOUT_A_REPORTER = {COMMANDS / "main.py"}
ASK_THE_TABLE = [BUILDER / "plan", BUILDER / "compile", BUILDER / "toolchains" / "versions.py",
                 BUILDER / "toolchains" / "toolchain.py", BUILDER / "project" / "dependencies.py",
                 BUILDER / "stage" / "toolchain_record.py", BUILDER / "verify" / "reproduce.py"]
BACKEND_NAMES = {"cpu", "cuda", "rocm", "xpu", "metal", "neuron", "tpu", "cann", "npu"}
NAME_NO_BACKEND = [BUILDER / "toolchains" / "provision.py", BUILDER / "stage" / "link_check.py"]
TOOLKIT_WORDS = BACKEND_NAMES | {"nvcc"}  # a backend's name, or its compiler's


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


def backend_name_tests(found: list[tuple[Path, ast.AST]]) -> list[str]:
    """`x == "cuda"`, `x in ("cuda", None)`, ... in the modules that must ask the table."""
    def named(node: ast.expr) -> bool:
        values = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
        return any(isinstance(v, ast.Constant) and v.value in BACKEND_NAMES for v in values)

    asking = [p for p, _ in found if any(p == a or a in p.parents for a in ASK_THE_TABLE)]
    return [f"{path.relative_to(BUILDER.parent)}:{node.lineno}: {ast.unparse(node)}" for path, tree in found
            if path in asking for node in ast.walk(tree)
            if isinstance(node, ast.Compare) and any(named(n) for n in (node.left, *node.comparators))]


def backend_names(found: list[tuple[Path, ast.AST]]) -> list[str]:
    """In the modules that must name no backend: an import of a backend's own module (only the table,
    `builder.backends`, and its interface, `.base`), a name with a backend's (or its compiler's) as one
    of its words (`cuda_home`, `cuda=`, `_nvcc_version`), a string that is a key or file so named ("cuda",
    "torch_cuda", "libcuda.so"; words of a message, such as torch's "CPU build", are not looked at)."""
    def worded(name: str) -> bool:  # case counts: a backend's key is lower case
        return bool(TOOLKIT_WORDS & {w.removeprefix("lib") for w in re.split(r"[^A-Za-z0-9]+", name)})

    def words(identifier: str) -> str:  # CudaWheels -> cuda_wheels
        return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", identifier).lower()

    wrong = set()
    for path, tree in found:
        if path not in NAME_NO_BACKEND:
            continue
        for node in ast.walk(tree):
            modules = {n.split(".")[2] for n in imported(node) if n.startswith("builder.backends.")}
            names = sorted(modules - {"base", *(a.name for a in getattr(node, "names", ()))})
            if isinstance(node, ast.Name):
                names.append(words(node.id))
            elif isinstance(node, ast.Attribute):
                names.append(words(node.attr))
            elif isinstance(node, (ast.arg, ast.keyword)) and node.arg:
                names.append(words(node.arg))
            elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                names.append(words(node.name))
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and " " not in node.value:
                names.append(node.value)
            wrong |= {(path, node.lineno, n) for n in names if worded(n)}
    return [f"{path.relative_to(BUILDER.parent)}:{line}: {name}" for path, line, name in sorted(wrong)]


def test_no_command_imports_another():
    assert commands_imported_by_commands(modules()) == []


def test_only_config_environment_reads_the_environment():
    assert environment_reads(modules()) == []


def test_only_the_reporter_writes_to_the_terminal():
    assert terminal_writes(modules()) == []


def test_the_stages_ask_the_backends_table_not_a_backends_name():
    assert backend_name_tests(modules()) == []


def test_the_store_and_the_link_check_name_no_backend():
    assert backend_names(modules()) == []


def test_the_checks_see_what_they_look_for(tmp_path):
    """Each check finds its fault in a module written for it."""
    text = ("import os\nimport sys\nfrom builder.commands.build import run\nfrom builder.commands import arguments\n"
            "def f():\n    print(os.environ['X'], file=sys.stderr)\n")
    found = [(COMMANDS / "lock.py", ast.parse(text))]
    assert commands_imported_by_commands(found) == ["lock.py:3 imports builder.commands.build",
                                                   "lock.py:3 imports builder.commands.build.run"]
    assert environment_reads(found) == ["builder/commands/lock.py:6"]
    assert terminal_writes(found) == ["builder/commands/lock.py:6", "builder/commands/lock.py:6"]
    planner = [(BUILDER / "plan" / "planner.py", ast.parse("ok = backend in ('cuda', None)\nfine = kind == 'torch'\n"))]
    assert backend_name_tests(planner) == ["builder/plan/planner.py:1: backend in ('cuda', None)"]
    store = [(BUILDER / "toolchains" / "provision.py", ast.parse(
        "from builder.backends import BACKENDS\nfrom builder.backends.cuda_toolkit import find_cuda\n"
        "def torch_python(version, cuda): return marker.get('torch_cuda'), kind == 'torch'\n"
        "home = store.cuda_home((13, 2), 'cuda-toolkit==13.2.*')\nwheels = CudaWheels(CPU_BUILD)\n"))]
    assert backend_names(store) == [
        "builder/toolchains/provision.py:2: cuda_toolkit", "builder/toolchains/provision.py:3: cuda",
        "builder/toolchains/provision.py:3: torch_cuda", "builder/toolchains/provision.py:4: cuda-toolkit==13.2.*",
        "builder/toolchains/provision.py:4: cuda_home",
        "builder/toolchains/provision.py:5: cpu_build", "builder/toolchains/provision.py:5: cuda_wheels"]
    link = [(BUILDER / "stage" / "link_check.py", ast.parse("DRIVER_LIBRARIES = ('libcuda.so', 'libnvidia-ml.so')\n"))]
    assert backend_names(link) == ["builder/stage/link_check.py:1: libcuda.so"]
