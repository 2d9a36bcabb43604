"""docs/ARCHITECTURE.md's claim about the runtime's dependencies, held: `kbuild/` needs only packaging (and
torch when it loads a variant) to load from a folder or a local hub, and huggingface_hub (the `hub` extra) only
to read an HTTP hub. Each load runs in a fresh interpreter where every other distribution kbuild's extras
install (huggingface_hub, rich, starlette, sigstore, ...) and kbuild's other packages (builder, kbuild_hub,
kbuild_common) cannot be imported."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest
import tomllib
from packaging.requirements import Requirement

from runtime_hubs import Kernel, runtime_env, torch_probes  # noqa: F401 (fixtures)

ROOT = Path(__file__).resolve().parents[2]
ALLOWED = {"packaging", "torch"}  # what the runtime may need to load from a folder or a local hub
OUR_OTHER_PACKAGES = {"builder", "kbuild_hub", "kbuild_common"}

# The child: refuse the blocked top-level modules, then load the kernel as asked and print what it loaded.
CHILD = """
import importlib.abc, json, sys
blocked = set(json.loads(sys.argv[1]))

class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in blocked:
            raise ModuleNotFoundError(f"blocked by the test: {name}", name=name)  # as if not installed
        return None

sys.meta_path.insert(0, Refuse())
import kbuild
how, where = sys.argv[2], sys.argv[3]
module = (kbuild.get_local_kernel(where, backend="cpu") if how == "folder"
          else kbuild.get_kernel("org/tiny@v1", hub=where, backend="cpu"))
print(json.dumps({"double": module.double(21), "loaded": sorted({m.partition(".")[0] for m in sys.modules} & blocked)}))
"""


def extras_modules() -> set[str]:
    """The top-level modules of every distribution one of kbuild's extras names, as installed here."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    wanted = {Requirement(r).name.lower().replace("_", "-") for reqs in extras.values() for r in reqs} - {"kbuild"}
    modules = {module for module, dists in packages_distributions().items()
               if any(d.lower().replace("_", "-") in wanted for d in dists)}
    return modules - ALLOWED - {"kbuild"} - set(sys.stdlib_module_names)


def load_alone(how: str, where: Path) -> dict:
    blocked = sorted(extras_modules() | OUR_OTHER_PACKAGES)
    done = subprocess.run([sys.executable, "-c", CHILD, json.dumps(blocked), how, str(where)],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr.strip().splitlines()[-3:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture
def kernel(tmp_path, runtime_env) -> Kernel:  # noqa: F811 (the fixture, by name)
    return Kernel(tmp_path / "tiny").write().build()


def test_the_block_covers_the_hub_extra():
    """The check would see the dependency the claim is about: huggingface_hub is among the blocked."""
    assert "huggingface_hub" in extras_modules()


def test_the_runtime_loads_a_folder_with_only_packaging_and_torch(kernel):
    assert load_alone("folder", kernel.root) == {"double": 42, "loaded": []}


def test_the_runtime_loads_from_a_local_hub_with_only_packaging_and_torch(kernel, tmp_path):
    hub = tmp_path / "hub"
    kernel.publish(hub)
    assert load_alone("hub", hub) == {"double": 42, "loaded": []}
