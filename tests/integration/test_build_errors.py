"""Integration: what a kernel author porting a real project meets, with real nvcc and pip.

A missing CUTLASS header reads as one line naming the unit, the include and the `depends` entry;
naming that entry provisions CUTLASS from PyPI's nvidia-cutlass and the unit compiles; a build
for fewer archs (`--cuda-archs`, TORCH_CUDA_ARCH_LIST) is recorded as partial and `kbuild
publish` refuses it unless told. The CUDA unit of kernels/activation includes no torch header,
so one arch compiles in seconds.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from builder.commands.main import main
from kbuild.variants import Compute, Platform, TorchStableAbi, Variant, detect_system

REPO = Path(__file__).resolve().parents[2]
torch = pytest.importorskip("torch")
SYSTEM = detect_system()
needs_cuda = pytest.mark.skipif(SYSTEM.backend != "cuda", reason="needs a CUDA build of torch and nvcc")
IGNORE = shutil.ignore_patterns("build", ".kbuild", "__pycache__", ".pytest_cache")


def cuda_variant() -> str:
    return Variant(framework=TorchStableAbi((2, 10)), compute=Compute("cuda", SYSTEM.compute_version),
                   platform=Platform(SYSTEM.cpu, SYSTEM.os)).name


@pytest.fixture
def activation(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("KBUILD_TOOLCHAINS", str(tmp_path / "toolchains"))  # CUTLASS lands here
    monkeypatch.delenv("TORCH_CUDA_ARCH_LIST", raising=False)
    return Path(shutil.copytree(REPO / "kernels" / "activation", tmp_path / "activation", ignore=IGNORE))


def run(capsys, *args: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out + out.err


@needs_cuda
def test_missing_cutlass_header_names_the_dependency_then_cutlass_is_provisioned(activation, capsys):
    cu = activation / "activation_cuda" / "activation.cu"
    cu.write_text("#include <cutlass/cutlass.h>\n" + cu.read_text())
    variant = cuda_variant()
    code, output = run(capsys, "build", str(activation), "--variant", variant, "--cuda-archs", "8.0")
    assert code == 1
    assert re.search(rf"failed\s+activation/{variant} .* — activation_cuda/activation\.cu: activation_cuda/"
                     r"activation\.cu:1 includes cutlass/cutlass\.h, which no include folder of the unit has; "
                     r"it comes with cutlass_X_Y: add it to \[kernel\.activation_cuda\] depends", output), output
    toml = activation / "build.toml"
    toml.write_text(toml.read_text().replace('depends = []', 'depends = ["cutlass_3_6"]', 1))
    code, output = run(capsys, "build", str(activation), "--variant", variant, "--cuda-archs", "8.0")
    assert code == 0, output
    assert "installing nvidia-cutlass==3.6.0.0 (headers)" in output
    code, output = run(capsys, "toolchain", "list")
    assert re.search(r"cutlass-3\.6\s+cutlass 3\.6 .*CUTLASS 3\.6\.0\.0 headers", output), output


@needs_cuda
def test_partial_arch_builds_are_recorded_and_refused_by_publish(activation, tmp_path, capsys, monkeypatch):
    variant = cuda_variant()
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "8.0")  # torch's variable, read like --cuda-archs
    code, output = run(capsys, "build", str(activation), "--variant", variant)
    assert code == 0, output
    backend = json.loads((activation / "build" / variant / "metadata.json").read_text())["backend"]
    assert backend == {"type": "cuda", "archs": ["8.0"], "archs-partial": True}
    hub = tmp_path / "hub"
    publish = ["publish", str(activation), "--hub", str(hub), "--allow-dirty", "--variant", variant]
    code, output = run(capsys, *publish)
    assert code != 0
    assert f"kbuild: error: {variant} was built for CUDA archs 8.0 only (--cuda-archs)" in output, output
    assert not hub.exists() or not any(hub.rglob("*.git"))  # nothing was written
    code, output = run(capsys, *publish, "--allow-partial-archs")
    assert code == 0, output
    assert f"published {variant} to kbuild/activation@v1" in output, output


def test_cuda_arch_errors_are_one_line(activation, capsys):
    code, output = run(capsys, "build", str(activation), "--cuda-archs", "8.0;8.5")
    assert code != 0
    assert 'kbuild: error: --cuda-archs: unknown capability "8.5"' in output, output
    assert "Traceback" not in output
    if not torch.cuda.is_available():
        code, output = run(capsys, "build", str(activation), "--cuda-archs", "native")
        assert code != 0
        assert re.search(r"kbuild: error: --cuda-archs native: torch in \S+ sees no GPU", output), output


def test_headers_of_cuda_sections_are_provisioned_only_for_cuda_builds(activation, capsys):
    toml = activation / "build.toml"
    toml.write_text(toml.read_text().replace('depends = []', 'depends = ["cutlass_2_10"]', 1))
    cpu = Variant(framework=TorchStableAbi((2, 10)), compute=Compute("cpu"), platform=Platform(SYSTEM.cpu, SYSTEM.os)).name
    code, output = run(capsys, "build", str(activation), "--variant", cpu)
    assert code == 0, output  # the CUDA section is not compiled: its CUTLASS is never asked for
    assert "nvidia-cutlass" not in output
    if SYSTEM.backend == "cuda":
        # headers that cannot be provisioned fail the variants whose sections need them, and only those
        code, output = run(capsys, "build", str(activation), "--cuda-archs", "8.0")
        assert code == 1
        assert re.search(rf"failed\s+activation/{cuda_variant()} .* — \S*build\.toml:\d+: "
                         r"\[kernel\.activation_cuda\] depends: cutlass_2_10: PyPI's nvidia-cutlass has no 2\.x "
                         r"release \(known: 3\.3\.0\.0", output), output
        assert re.search(rf"(built|unchanged)\s+activation/{cpu} ", output), output


def test_a_missing_python_package_stops_check_and_build(activation, capsys):
    """Without torch-ext/<name>/__init__.py a variant would build and publish, then fail at load."""
    package = activation / "torch-ext" / "activation"
    shutil.rmtree(package)
    for command in ("check", "build"):
        code, out = run(capsys, command, str(activation))
        assert code == 2 and "the kernel's Python package is missing" in out, out
        assert "torch-ext/activation/__init__.py" in out and "Traceback" not in out
    package.mkdir()
    code, out = run(capsys, "check", str(activation))
    assert code == 2 and "the kernel's Python package has no __init__.py" in out
    assert not (activation / "build").exists()  # nothing was built


def test_a_compile_error_shows_the_compilers_lines_with_paths_from_here(activation, capsys, monkeypatch):
    """The first error, its source line and caret in the console; the path opens from the current
    directory (here: the folder above the kernel); the unit, the variant and the full log follow."""
    source = activation / "activation_cpu" / "activation_cpu.cpp"
    text = source.read_text()
    source.write_text(text.replace("{", "{ int broken = ;", 1))
    monkeypatch.chdir(activation.parent)
    code, out = run(capsys, "build", "activation", "--variant", "torch-stable-abi210-cpu-x86_64-linux")
    assert code == 1
    failed = next(line for line in out.splitlines() if line.startswith("failed"))
    assert "activation/torch-stable-abi210-cpu-x86_64-linux" in failed
    assert re.search(r"— activation_cpu/activation_cpu\.cpp: activation/activation_cpu/activation_cpu\.cpp:\d+:\d+: "
                     r"error: expected primary-expression", failed), failed
    lines = out.splitlines()
    at = lines.index(failed)
    assert "int broken = ;" in lines[at + 1] and lines[at + 2].strip().startswith("|")  # source line, caret
    assert any(line.strip() == f"full log: {activation}/.kbuild/torch-stable-abi210-cpu-x86_64-linux/build.log"
               for line in lines[at:at + 8])
    assert (activation.parent / "activation" / "activation_cpu" / "activation_cpu.cpp").is_file()  # it opens
