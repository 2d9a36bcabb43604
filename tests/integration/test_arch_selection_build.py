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
                        f"them is in --cuda-archs 9.0a; it is not compiled into {variant}, which kbuild refuses "
                        "after linking if the rest of the library calls into it"], out.err
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


# -- a binding that calls into a section --cuda-archs leaves out (sage-attention's shape) -----------

# The Blackwell section defines a host function the binding calls with no #if around the call, as
# sage-attention's binding calls its sm80, sm89 and sm100 sections' entry points.
BLACKWELL_ENTRY_CU = BLACKWELL_CU + ("void blackwell_scale(float* x) { blackwell_kernel<<<1, 32>>>(x); }\n")
CALLING_BINDING = BINDING + "void blackwell_scale(float* x);\nvoid scale_op(float* x) { blackwell_scale(x); }\n"


def write_calling_project(root: Path, binding: str = CALLING_BINDING) -> Path:
    write_project(root)
    (root / "blackwell" / "blackwell.cu").write_text(BLACKWELL_ENTRY_CU)
    (root / "torch-ext" / "torch_binding.cpp").write_text(binding)
    return root


def _cuda_or_skip(monkeypatch):
    from kbuild.variants import detect_system

    system = detect_system()
    if system.backend != "cuda":
        pytest.skip("needs a CUDA build of torch and nvcc")
    monkeypatch.delenv("TORCH_CUDA_ARCH_LIST", raising=False)
    return system.compiled_variant().name


def test_a_library_calling_a_left_out_section_is_refused_naming_the_archs_to_add(tmp_path, capsys, monkeypatch):
    from builder.commands.main import main

    variant = _cuda_or_skip(monkeypatch)
    project = write_calling_project(tmp_path / "two-archs")
    capsys.readouterr()
    assert main(["build", str(project), "--cuda-archs", "9.0a", "--no-cache"]) == 1
    out = capsys.readouterr()
    lines = [line for line in (out.out + out.err).splitlines() if "cannot load" in line]
    assert lines, out.out + out.err
    assert ("cannot load: undefined symbol blackwell_scale(float*), called from torch-ext/torch_binding.cpp; "
            'defined in [kernel.blackwell] (10.0a), which --cuda-archs 9.0a left out: build with --cuda-archs '
            '"9.0a;10.0a" to compile it too, or without --cuda-archs') \
        in lines[0], lines
    assert "_two_archs_cuda_" in lines[0], lines  # the library, by its op namespace
    assert not (project / "build" / variant).exists()  # nothing staged
    assert not list((project / ".kbuild" / variant).glob("*.so"))  # nor left for a no-op rebuild to stage
    assert main(["build", str(project), "--cuda-archs", "9.0a", "--no-cache"]) == 1  # refused again

    # what the line says to pass builds a library that imports (kbuild imported it before staging)
    capsys.readouterr()
    assert main(["build", str(project), "--cuda-archs", "9.0a;10.0a", "--no-cache"]) == 0, capsys.readouterr()
    backend = json.loads((project / "build" / variant / "metadata.json").read_text())["backend"]
    assert backend == {"type": "cuda", "archs": ["9.0a", "10.0a"]}


def test_a_symbol_no_section_defines_is_refused(tmp_path, capsys, monkeypatch):
    from builder.commands.main import main

    variant = _cuda_or_skip(monkeypatch)
    binding = BINDING + "void hopper_scale(float* x);\nvoid scale_op(float* x) { hopper_scale(x); }\n"
    project = write_calling_project(tmp_path / "two-archs", binding)
    capsys.readouterr()
    assert main(["build", str(project), "--no-cache"]) == 1
    out = capsys.readouterr()
    assert ("cannot load: undefined symbol hopper_scale(float*), called from torch-ext/torch_binding.cpp; no "
            "section of build.toml defines it") in out.out + out.err
    assert not (project / "build" / variant).exists()


def test_a_library_whose_import_dies_is_refused(tmp_path, capsys, monkeypatch):
    """Every symbol resolves, but importing it runs a static initialiser that throws: the import
    check (the library loaded in the torch that built it) catches what reading the file cannot."""
    from builder.commands.main import main

    variant = _cuda_or_skip(monkeypatch)
    binding = BINDING.replace('#include "registration.h"\n', '#include "registration.h"\n#include <stdexcept>\n') + (
        'static int boom = [] { throw std::runtime_error("static initialiser failed"); return 0; }();\n')
    project = write_calling_project(tmp_path / "two-archs", binding)
    capsys.readouterr()
    assert main(["build", str(project), "--no-cache"]) == 1
    out = capsys.readouterr()
    text = out.out + out.err
    assert "does not load in torch" in text and "static initialiser failed" in text, text
    assert not (project / "build" / variant).exists()


# -- what a build and `kbuild test` of a CUDA variant say, with and without work to do --------------

GPU_SUITE = '''\
import pytest
import torch


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_hopper_runs():
    import two_archs  # noqa: F401
'''


def test_nvcc_threads_are_named_only_when_nvcc_ran_and_kbuild_test_names_no_absent_gpu(tmp_path, capsys, monkeypatch):
    """The threads line comes with an nvcc run, never on a no-op rebuild (issue 45); and `kbuild test`
    on a machine without a GPU does not say it tests `on cuda` before the suite skips."""
    import torch

    from builder.commands.main import main

    variant = _cuda_or_skip(monkeypatch)
    monkeypatch.setenv("NVCC_THREADS", "2")  # as a user sets it: two threads whatever the cores
    project = write_project(tmp_path / "two-archs")
    (project / "tests").mkdir()
    (project / "tests" / "test_hopper.py").write_text(GPU_SUITE)

    def build() -> str:
        capsys.readouterr()
        assert main(["build", str(project), "--cuda-archs", "9.0a", "--no-cache"]) == 0
        out = capsys.readouterr()
        return out.out + out.err

    first = build()
    assert "nvcc compiled each unit's archs in 2 threads" in first, first
    again = build()
    assert "nothing to compile" in again and "archs in 2 threads" not in again, again

    capsys.readouterr()
    code = main(["test", str(project)])
    out = capsys.readouterr()
    said = out.out + out.err
    if torch.cuda.is_available():
        assert code == 0 and f"testing two-archs/{variant} on cuda" in said, said
    else:
        assert f"testing two-archs/{variant} without a GPU (tests that need one skip)" in said, said
        assert "on cuda" not in said and "no CUDA device" in said, said
