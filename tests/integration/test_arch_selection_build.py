"""A real 9.0a build of the two-arch kernel: the Blackwell section is skipped and publish says so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from plan_inputs import write_kernel

# A Hopper section and a Blackwell one beside it (what kernels-community projects do), plus a
# section on the default list. No source includes torch: the real build below is quick.
TWO_ARCHS = """\
[general]
name = "two-archs"
version = 1
edition = 5
license = "Apache-2.0"
backends = {backends}

[torch]
src = ["torch-ext/torch_binding.cpp"]

[kernel.hopper]
backend = "cuda"
depends = []
cuda-capabilities = ["9.0a"]
src = ["hopper/hopper.cu"]

[kernel.blackwell]
backend = "cuda"
depends = []
cuda-capabilities = [{blackwell}]
src = ["blackwell/blackwell.cu"]
{extra}"""


def two_archs(tmp_path, blackwell='"10.0a"', extra="", backends='["cuda"]', toml=TWO_ARCHS):
    return write_kernel(tmp_path / "two-archs", toml.format(blackwell=blackwell, extra=extra, backends=backends))


# -- a real build: nvcc, metadata.json, publish ---------------------------------------------------

HOPPER_CU = "__global__ void hopper_kernel(float* x) { x[threadIdx.x] *= 2.0f; }\n"
BLACKWELL_CU = "__global__ void blackwell_kernel(float* x) { x[threadIdx.x] *= 3.0f; }\n"
BINDING = '#include "registration.h"\nREGISTER_EXTENSION(TORCH_EXTENSION_NAME)\n'


def write_project(root: Path) -> Path:
    write_kernel(root, TWO_ARCHS.format(blackwell='"10.0a"', extra="", backends='["cuda"]'))
    (root / "hopper" / "hopper.cu").write_text(HOPPER_CU)
    (root / "blackwell" / "blackwell.cu").write_text(BLACKWELL_CU)
    (root / "torch-ext" / "torch_binding.cpp").write_text(BINDING)
    (root / "torch-ext" / "two_archs").mkdir(parents=True)
    (root / "torch-ext" / "two_archs" / "__init__.py").write_text("from ._ops import ops\n")
    return root


def test_a_9_0a_build_skips_the_blackwell_section_and_publish_says_so(tmp_path, capsys, monkeypatch):
    from builder.commands.main import main
    from kbuild.variants import detect_system

    system = detect_system()
    if system.backend != "cuda":
        pytest.skip("needs a CUDA build of torch and nvcc")
    monkeypatch.delenv("TORCH_CUDA_ARCH_LIST", raising=False)
    project = write_project(tmp_path / "two-archs")
    capsys.readouterr()
    code = main(["build", str(project), "--cuda-archs", "9.0a", "--no-cache"])
    out = capsys.readouterr()
    output = out.out + out.err
    variant = system.compiled_variant().name
    assert code == 0, output
    warnings = [line for line in out.err.splitlines() if "blackwell" in line]
    assert warnings == [f"kbuild: warning: two-archs: skipping [kernel.blackwell] (cuda-capabilities 10.0a): none of "
                        f"them is in --cuda-archs 9.0a; its ops are absent from {variant}"], out.err
    backend = json.loads((project / "build" / variant / "metadata.json").read_text())["backend"]
    assert backend == {"type": "cuda", "archs": ["9.0a"], "archs-partial": True,
                       "skipped-sections": {"blackwell": ["10.0a"]}}
    graph = (project / ".kbuild" / "build.ninja").read_text()
    assert "hopper.cu" in graph and "blackwell.cu" not in graph

    hub = tmp_path / "hub"
    publish = ["publish", str(project), "--hub", str(hub), "--allow-dirty", "--repo-id", "me/two-archs"]
    capsys.readouterr()
    assert main(publish) == 7
    err = capsys.readouterr().err
    assert (f"kbuild: error: {variant} was built for CUDA archs 9.0a only (--cuda-archs), not every arch the kernel "
            "lists, without the sections [kernel.blackwell] (10.0a) and their ops") in err, err
    assert main([*publish, "--allow-partial-archs"]) == 0
    assert f"published {variant} to me/two-archs@v1" in capsys.readouterr().out
