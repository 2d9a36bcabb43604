"""The manylinux policies by name, the floor's words and this host's detection: no build, no process."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from builder.commands.main import main
from builder.project.manylinux import policy_error, policy_name
from cpu_kernel import write_cpu_kernel
from kbuild import host_abi
from kbuild.metadata import AbiFloor
from runtime_hubs import Kernel  # noqa: F401 (fixtures)

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")


def test_policy_names():
    assert policy_name("2_28") == policy_name("manylinux_2_28") == "manylinux_2_28_x86_64"
    assert policy_error("2_28") is None
    assert "unknown manylinux policy \"2_99\"" in policy_error("2_99") and "2_28" in policy_error("2_99")


# --- the build ----------------------------------------------------------------------------------


def write_kernel(root: Path, extra: str = "") -> Path:
    source = '#include <dlfcn.h>\nextern "C" void *floor_probe(void *h) { return dlsym(h, "x"); }\n'
    return write_cpu_kernel(root, "floor", source, extra=extra, depends='["torch"]')


def test_an_unknown_policy_is_a_one_line_error(tmp_path, capsys):
    kernel = write_kernel(tmp_path / "floor", extra='manylinux = "2_99"')
    assert main(["check", str(kernel)]) != 0
    err = capsys.readouterr().err
    assert "build.toml" in err and "manylinux" in err and 'unknown manylinux policy "2_99"' in err
    assert "Traceback" not in err
    assert main(["build", str(write_kernel(tmp_path / "ok")), "--manylinux", "3_1"]) != 0
    assert '--manylinux: unknown manylinux policy "3_1"' in capsys.readouterr().err


def test_floor_problem_words():
    floor_ = AbiFloor(glibc="2.34", glibcxx="3.4.29")
    assert host_abi.floor_problem(floor_, (2, 31), (3, 4, 30)) == "needs glibc 2.34, this system has 2.31"
    assert "GLIBCXX_3.4.29, the loaded one has GLIBCXX_3.4.28" in host_abi.floor_problem(floor_, (2, 36), (3, 4, 28))
    assert host_abi.floor_problem(floor_, (2, 34), (3, 4, 29)) is None
    assert host_abi.floor_problem(floor_, None, None) is None  # unknown: not checked
    assert host_abi.floor_problem(None, (2, 17), None) is None


def test_this_host_is_detected():
    assert host_abi.glibc() is not None and host_abi.glibc() >= (2, 17)
    import torch  # noqa: F401  (loads libstdc++)
    assert host_abi.libstdcxx() is not None and host_abi.libstdcxx()[:2] == (3, 4)


@pytest.fixture
def kernel(tmp_path) -> Kernel:
    kernel = Kernel(tmp_path / "tiny").write().build()
    for name, glibc in (("torch-stable-abi210-cu130-x86_64-linux", "2.34"), ("torch214-cxx11-cu130-x86_64-linux", "2.17")):
        target = kernel.fake(name)
        meta = json.loads((target / "metadata.json").read_text())
        meta["abi"] = {"glibc": glibc, "glibcxx": "3.4.21", "manylinux": f"manylinux_{glibc.replace('.', '_')}_x86_64"}
        (target / "metadata.json").write_text(json.dumps(meta))
    return kernel
