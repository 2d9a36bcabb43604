"""A new compiled backend is one module in builder/backends/ and one line of its table, and nothing
else (docs/ARCHITECTURE.md, backends/). A copy of kbuild gets a test backend so: XPU, compiled by the
host C++ compiler, with a toolkit version axis of its own, read from the `[xpu."2025.1"]` row and the
torch row's `xpu` list that a versions overlay (KBUILD_VERSIONS) adds, not from versions.toml. That
copy then plans, builds (real ninja, real g++), stages (the stage's checks and its load check) and
loads tests/fixtures/xpu-stamp, whose section's source is the backend's own (.sycl), compiled by the
backend's own rule in the ninja graph; its op adds what that rule defines and the toolkit version its
section was compiled with.

The runtime judges an XPU variant unfit for this torch (it is no XPU build), so the variant is loaded
as a folder, as the stage's load check imports it: kbuild.loading.load_variant, which loads what it is
given after verifying its digest.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("builder", "kbuild", "kbuild_common", "kbuild_hub")
IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc")
TABLE_LINE = '    ("builder.backends.cuda", "CUDA"),\n'  # the new backend's line goes after it

BACKEND = '''"""XPU as a test builds it: sections whose sources are its own (.sycl) compiled by a rule of its own
(the toolkit's compiler, the host C++ one, told the language, with XPU_RULE defined), with a toolkit
version axis of its own ([xpu."X.Y"] rows of the versions table), which names the variants
(xpu20251) and reaches the sources as XPU_TOOLKIT."""

from __future__ import annotations

from dataclasses import dataclass

from builder.backends.base import Backend, CompileRule


@dataclass(frozen=True)
class HostToolkit:
    version: tuple[int, int]
    cxx: str

    def __str__(self) -> str:
        return f"XPU {self.version[0]}.{self.version[1]} ({self.cxx})"


class Xpu(Backend):
    name = "xpu"
    source_tools = {".sycl": CompileRule("xpu", "XPU")}  # its compiler speaks gcc's options
    toolkit_table = "xpu"
    toolkit_label = "XPU"
    toolkit_row = {"toolkit": (str, 'compiler, like "c++"')}
    torch_row_list = 'list of XPU versions, like ["2025.1"]'

    def provision_toolkit(self, store, release, options):
        return HostToolkit(release.version, release.toolkit)

    def standalone_flags(self, inputs) -> list[str]:
        major, minor = self.toolkit(inputs).version
        return [f"-DXPU_TOOLKIT={major}.{minor}"]

    def compiler(self, inputs, tool: str) -> str:
        return self.toolkit(inputs).cxx

    def compile_flags(self, inputs, tool, capabilities, section, host, std) -> list[str]:
        return [*host, std, "-x", "c++", "-DXPU_RULE=10000"]


XPU = Xpu()
'''


def tree(root: Path) -> dict[str, bytes]:
    """Every file under `root` by its path, through links (builder/templates is one; the copy holds the files)."""
    files = {}
    for folder, dirs, names in os.walk(root, followlinks=True):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        files.update({str(Path(folder, n).relative_to(root)): Path(folder, n).read_bytes()
                      for n in names if not n.endswith(".pyc")})
    return files


@pytest.fixture(scope="module")
def kbuild_with_xpu(tmp_path_factory) -> Path:
    """A copy of kbuild's packages with the XPU backend added: its module and its line."""
    root = tmp_path_factory.mktemp("kbuild-xpu")
    for package in PACKAGES:
        shutil.copytree(REPO / package, root / package, ignore=IGNORE)
    (root / "builder" / "backends" / "xpu.py").write_text(BACKEND)
    table = root / "builder" / "backends" / "__init__.py"
    text = table.read_text()
    assert TABLE_LINE in text, "the backends' table changed shape: update TABLE_LINE"
    table.write_text(text.replace(TABLE_LINE, TABLE_LINE + '    ("builder.backends.xpu", "XPU"),\n'))
    return root


def test_the_copy_differs_by_the_module_and_the_line(kbuild_with_xpu):
    changed = {}
    for package in PACKAGES:
        ours, theirs = tree(REPO / package), tree(kbuild_with_xpu / package)
        changed.update({f"{package}/{p}": (ours.get(p), theirs.get(p)) for p in ours.keys() | theirs.keys()
                        if ours.get(p) != theirs.get(p)})
    assert sorted(changed) == ["builder/backends/__init__.py", "builder/backends/xpu.py"]
    assert changed["builder/backends/xpu.py"][0] is None  # a new module
    before, after = (b.decode().splitlines() for b in changed["builder/backends/__init__.py"])
    diff = [line for line in difflib.ndiff(before, after) if line[:1] in "+-"]
    assert diff == ['+     ("builder.backends.xpu", "XPU"),']


def run_kbuild(root: Path, *args: str, env: dict) -> subprocess.CompletedProcess:
    """kbuild from the copy at `root` (its packages ahead of the checkout's)."""
    return subprocess.run([sys.executable, "-m", "builder.commands.main", *args], cwd=root, env=env,
                          capture_output=True, text=True, timeout=900)


def test_the_new_backend_plans_builds_stages_and_loads(kbuild_with_xpu, tmp_path):
    series = ".".join(torch.__version__.split(".")[:2])
    release = torch.__version__.split("+")[0]
    overlay = tmp_path / "versions.toml"
    overlay.write_text(f'[torch."{series}"]\nversion = "{release}"\ncuda = []\nxpu = ["2025.1"]\n\n'
                       '[xpu."2025.1"]\ntoolkit = "c++"\n')
    kernel = tmp_path / "xpu-stamp"
    shutil.copytree(REPO / "tests" / "fixtures" / "xpu-stamp", kernel)
    env = {**os.environ, "PYTHONPATH": str(kbuild_with_xpu), "KBUILD_VERSIONS": str(overlay),
           "KBUILD_CACHE": str(tmp_path / "cache"), "KBUILD_TOOLCHAINS": str(tmp_path / "toolchains"), "CI": "1"}
    variant = f"torch{series.replace('.', '')}-cxx11-xpu20251-x86_64-linux"

    # planned: the matrix holds the variant, built with the overlay's toolkit row
    listed = run_kbuild(kbuild_with_xpu, "variants", str(kernel), "--json", env=env)
    assert listed.returncode == 0, listed.stdout + listed.stderr
    (row,) = [r for r in json.loads(listed.stdout) if r.get("variant") == variant]
    assert row["xpu"] == "2025.1" and row["from"]["xpu"].startswith(f"{overlay}:")

    # built, checked and staged (the stage imports the library in the torch that built it)
    built = run_kbuild(kbuild_with_xpu, "build", str(kernel), "--variant", variant, env=env)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    folder = kernel / "build" / variant
    graph = re.sub(r" \$\n +", " ", (kernel / ".kbuild" / "build.ninja").read_text())  # long lines joined
    assert "rule xpu\n" in graph and "stamp_xpu/stamp.sycl.o: xpu " in graph  # the backend's own rule compiled it
    assert json.loads((folder / "metadata.json").read_text())["provenance"]["toolchain"]["torch"]["version"] == \
        torch.__version__

    # loaded from the copy's runtime, and its op called
    load = ("import sys, torch; from kbuild.loading import load_variant; import kbuild; "
            f"assert kbuild.__file__.startswith({str(kbuild_with_xpu)!r}), kbuild.__file__; "
            f"print(load_variant({str(folder)!r}).stamp(torch.zeros(2, dtype=torch.float64)).tolist())")
    loaded = subprocess.run([sys.executable, "-c", load], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=300)
    assert loaded.returncode == 0, loaded.stderr[-3000:]
    assert loaded.stdout.strip().splitlines()[-1] == "[12025.1, 12025.1]"  # the rule's 10000 + the toolkit's 2025.1
