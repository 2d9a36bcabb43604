"""A stable-ABI build loads in the torch that built it and runs unchanged in torch 2.13."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "relu-stable"
STABLE_CPU = "torch-stable-abi210-cpu-x86_64-linux"
STABLE_CU130 = "torch-stable-abi210-cu130-x86_64-linux"


# -- build and load (slow) ------------------------------------------------------------------


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """The fixture built with this venv's torch (every variant it can build here)."""
    pytest.importorskip("torch")
    from builder.commands.main import main

    project = tmp_path_factory.mktemp("stable") / "relu-stable"
    shutil.copytree(FIXTURE, project, ignore=shutil.ignore_patterns("build", ".kbuild", "__pycache__"))
    assert main(["build", str(project), "-j", "4"]) == 0
    return project


def test_stable_build_loads_in_the_building_torch(built):
    import torch

    from builder.commands.main import main
    from kbuild import get_local_kernel
    from kbuild.variants import detect_system

    names = {p.name for p in (built / "build").iterdir() if not p.name.startswith(".")}
    assert STABLE_CPU in names and not any(n.startswith("torch2") for n in names)
    if detect_system().backend == "cuda":
        assert STABLE_CU130 in names or any(n.startswith("torch-stable-abi210-cu") for n in names)
    relu = get_local_kernel(built, backend="cpu")
    assert relu.__name__.startswith("_relu_stable_cpu_") and Path(relu.__file__).parent.name == STABLE_CPU
    assert relu.__all__ == ["relu"]
    x = torch.randn(1000)
    torch.testing.assert_close(relu.relu(x), torch.relu(x))
    with pytest.raises(RuntimeError, match="only float32"):
        relu.relu(x.double())
    assert main(["test", str(built), "--variant", STABLE_CPU]) == 0


LOAD_SCRIPT = """\
import sys, torch
from kbuild import get_local_kernel
relu = get_local_kernel(sys.argv[1], backend="cpu")
x = torch.randn(1000)
torch.testing.assert_close(relu.relu(x), torch.relu(x))
from pathlib import Path
print("torch", torch.__version__, "variant", Path(relu.__file__).parent.name)
"""


def test_the_same_so_runs_in_torch_2_13(built, torch213_python):
    python = torch213_python
    done = subprocess.run([str(python), "-c", LOAD_SCRIPT, str(built)], capture_output=True, text=True,
                          timeout=600, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"torch 2.13.0+cpu variant {STABLE_CPU}" in done.stdout
    cli = subprocess.run([sys.executable, "-m", "builder.commands.main", "test", str(built), "--variant", STABLE_CPU,
                          "--python", str(python)], capture_output=True, text=True, timeout=600, cwd=REPO)
    assert cli.returncode == 0, cli.stdout[-3000:] + cli.stderr[-3000:]
    assert "passed" in cli.stdout + cli.stderr
