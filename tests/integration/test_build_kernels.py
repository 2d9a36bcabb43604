"""Integration: build the first-party kernels with real ninja, g++ and nvcc, then test and load them.

One workspace build (all of kernels/* in one ninja graph) is shared by the module; the tests
then check the layout, incremental rebuilds, `kbuild test`, and loading through kbuild's and
Hugging Face's loaders. Compiling needs no GPU; running CUDA ops does, so here they only import.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from builder.commands.main import main
from kbuild import get_local_kernel
from kbuild.digest import verify_tree
from kbuild.variants import Compute, Platform, TorchStableAbi, Variant, detect_system

REPO = Path(__file__).resolve().parents[2]
torch = pytest.importorskip("torch")
SYSTEM = detect_system()
# rmsnorm is a classic build for exactly this torch (torch214-cxx11-…); activation is built against
# torch's stable ABI 2.10 (torch-stable-abi210-…), one build per backend for every torch >= 2.10.
CPU = detect_system("cpu").compiled_variant().name
CUDA = SYSTEM.compiled_variant().name if SYSTEM.backend == "cuda" else None


def stable_variant(system) -> str:
    return Variant(framework=TorchStableAbi((2, 10)), compute=Compute(system.backend, system.compute_version),
                   platform=Platform(system.cpu, system.os)).name


ACT_CPU = stable_variant(detect_system("cpu"))
ACT_CUDA = stable_variant(SYSTEM) if SYSTEM.backend == "cuda" else None
VARIANTS = {"activation": (ACT_CPU, ACT_CUDA), "rmsnorm": (CPU, CUDA)}
IGNORE = shutil.ignore_patterns("build", ".kbuild", "__pycache__", ".pytest_cache")


def copy_kernel(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest, ignore=IGNORE)
    return dest


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    """A copy of the repo's workspace (build.toml + kernels/*), built once."""
    root = tmp_path_factory.mktemp("ws")
    shutil.copy(REPO / "build.toml", root / "build.toml")
    copy_kernel(REPO / "kernels", root / "kernels")
    assert main(["build", str(root), "-j", "2"]) == 0
    return root


def run_build(capsys, *args: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["build", *args])
    out = capsys.readouterr()
    return code, out.out + out.err


def compile_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if re.match(r"\[\d+/\d+\] (CXX|NVCC) ", line)]


@pytest.mark.parametrize("kernel", ["activation", "rmsnorm"])
def test_compiled_kernels_get_hf_layout(workspace, kernel):
    build = workspace / "kernels" / kernel / "build"
    expected = {name for name in VARIANTS[kernel] if name}
    assert {p.name for p in build.iterdir() if not p.name.startswith(".")} == expected
    for name in expected:
        variant = build / name
        meta = json.loads((variant / "metadata.json").read_text())
        backend = "cuda" if "-cu" in name else "cpu"
        assert re.fullmatch(rf"_{kernel}_{backend}_[0-9a-f]{{7}}(_dirty)?", meta["id"])
        assert (variant / f"{meta['id']}.abi3.so").is_file()
        assert {"__init__.py", "_ops.py", "metadata.json"} <= {p.name for p in variant.iterdir()}
        assert (variant / "layers.py").is_file() or (variant / "layers").is_dir()
        assert f"from . import {meta['id']}" in (variant / "_ops.py").read_text()
        assert meta["name"] == kernel and meta["version"] == 1 and meta["python-depends"] == []
        assert meta["backend"]["type"] == backend
        if backend == "cuda":
            assert meta["backend"]["archs"][-1].endswith("+PTX") and "9.0" in meta["backend"]["archs"]
        verify_tree(variant, meta["digest"]["files"])  # every file matches the digest


def test_triton_kernel_is_a_noarch_variant(workspace):
    build = workspace / "kernels" / "rotary" / "build"
    assert [p.name for p in build.iterdir() if not p.name.startswith(".")] == ["torch-cuda"]
    meta = json.loads((build / "torch-cuda" / "metadata.json").read_text())
    assert not list((build / "torch-cuda").glob("*.so"))
    verify_tree(build / "torch-cuda", meta["digest"]["files"])


def test_noop_rebuild_runs_no_compiler(workspace, capsys):
    meta = workspace / "kernels" / "activation" / "build" / ACT_CPU / "metadata.json"
    before = meta.stat().st_mtime_ns
    code, output = run_build(capsys, str(workspace))
    assert code == 0
    assert compile_lines(output) == []
    assert "nothing to compile" in output
    assert meta.stat().st_mtime_ns == before  # unchanged variants are not rewritten


def test_touching_one_source_recompiles_only_it(workspace, capsys):
    source = workspace / "kernels" / "rmsnorm" / "rmsnorm_cpu" / "rmsnorm_cpu.cpp"
    os.utime(source)
    code, output = run_build(capsys, str(workspace))
    assert code == 0
    lines = compile_lines(output)
    assert len(lines) == 1 and "rmsnorm_cpu.cpp" in lines[0] and CPU in lines[0], output


def test_kbuild_test_runs_each_kernels_tests(workspace, capsys):
    capsys.readouterr()
    assert main(["test", str(workspace)]) == 0
    output = "\n".join(capsys.readouterr())
    for kernel in ("activation", "rmsnorm"):
        assert re.search(rf"passed\s+{kernel}/{VARIANTS[kernel][0]}", output), output
    assert re.search(r"passed\s+rotary/torch-cuda", output), output


def test_get_local_kernel_runs_the_cpu_build(workspace):
    activation = get_local_kernel(workspace / "kernels" / "activation", backend="cpu")
    assert "_activation_cpu_" in activation.__name__ and Path(activation.__file__).parent.name == ACT_CPU
    x = torch.randn(8, 64, dtype=torch.float64).float()
    torch.testing.assert_close(activation.silu_and_mul(x), torch.nn.functional.silu(x[:, :32]) * x[:, 32:])
    assert "silu_and_mul" in activation.__all__
    if ACT_CUDA:
        # A CUDA torch that sees no GPU picks the CPU build by default; backend="cuda" still
        # loads the CUDA build (it imports without a GPU).
        default = get_local_kernel(workspace / "kernels" / "activation")
        expected = ACT_CUDA if torch.cuda.is_available() else ACT_CPU
        assert Path(default.__file__).parent.name == expected
        cuda = get_local_kernel(workspace / "kernels" / "activation", backend="cuda")
        assert "_activation_cuda_" in cuda.__name__ and Path(cuda.__file__).parent.name == ACT_CUDA


def test_two_builds_of_one_kernel_load_side_by_side(workspace, tmp_path):
    other = copy_kernel(workspace / "kernels" / "activation", tmp_path / "activation")
    cpp = other / "activation_cpu" / "activation_cpu.cpp"
    cpp.write_text(cpp.read_text() + "\n// a change: another source tree, another build id\n")
    assert main(["build", str(other), "--variant", ACT_CPU]) == 0
    first = get_local_kernel(workspace / "kernels" / "activation", backend="cpu")
    second = get_local_kernel(other, backend="cpu")
    assert first.__name__ != second.__name__ and sys.modules[second.__name__] is second
    x = torch.randn(4, 16)
    torch.testing.assert_close(first.gelu_and_mul(x), second.gelu_and_mul(x))


def test_huggingface_loader_loads_a_kbuild_build(workspace):
    pytest.importorskip("kernels")
    script = (
        "import sys, torch, kernels\n"
        "from pathlib import Path\n"
        "k = kernels.get_local_kernel(Path(sys.argv[1]), backend='cpu')\n"
        "x = torch.randn(16, 64)\n"
        "ref = torch.nn.functional.silu(x[:, :32]) * x[:, 32:]\n"
        "torch.testing.assert_close(k.silu_and_mul(x), ref)\n"
        "print('loaded', k.__name__)\n"
    )
    done = subprocess.run([sys.executable, "-c", script, str(workspace / "kernels" / "activation")],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "loaded _activation_cpu_" in done.stdout


def test_a_failed_variant_is_reported_and_the_previous_build_kept(workspace, tmp_path, capsys):
    kernel = copy_kernel(workspace / "kernels" / "activation", tmp_path / "activation")
    shutil.copytree(workspace / "kernels" / "activation" / "build", kernel / "build")
    before = (kernel / "build" / ACT_CPU / "metadata.json").read_text()
    cpp = kernel / "activation_cpu" / "activation_cpu.cpp"
    cpp.write_text(cpp.read_text() + "\nthis is not C++;\n")
    code, output = run_build(capsys, str(kernel), "--variant", ACT_CPU)
    assert code == 1
    assert re.search(rf"failed\s+activation/{ACT_CPU} .*this is not C\+\+;.*\n\s+full log: \S+build\.log", output,
                     re.DOTALL), output
    log = kernel / ".kbuild" / ACT_CPU / "build.log"
    assert f"CXX {cpp} ({ACT_CPU})\n" in log.read_text()  # the step's status line, attributed by the graph
    assert (kernel / "build" / ACT_CPU / "metadata.json").read_text() == before


def test_kernel_builder_project_builds_unchanged(tmp_path, capsys):
    project = copy_kernel(REPO / "tests" / "fixtures" / "relu-kb", tmp_path / "relu")
    code, output = run_build(capsys, str(project), "-j", "2")
    assert code == 0, output
    assert "edition 4" in output  # read with a warning
    names = {p.name for p in (project / "build").iterdir() if not p.name.startswith(".")}
    assert names == {CPU} | ({CUDA} if CUDA else set())
    relu = get_local_kernel(project, backend="cpu")
    x = torch.randn(100)
    torch.testing.assert_close(relu.relu(x), torch.relu(x))
    assert main(["test", str(project), "--variant", CPU]) == 0


def test_older_torch_environment_builds_its_own_variant(tmp_path, capsys, torch213_python):
    """`--python` builds against another environment's torch: 2.13.0 (CPU build) here. rmsnorm,
    a classic kernel, so the variant is named after that torch."""
    python = torch213_python
    kernel = copy_kernel(REPO / "kernels" / "rmsnorm", tmp_path / "rmsnorm")
    code, output = run_build(capsys, str(kernel), "--python", str(python))
    assert code == 0, output
    assert "skipping cuda: torch 2.13.0+cpu is a CPU build" in output
    assert [p.name for p in (kernel / "build").iterdir() if not p.name.startswith(".")] == [
        "torch213-cxx11-cpu-x86_64-linux"
    ]
    assert main(["test", str(kernel), "--python", str(python)]) == 0


def test_stable_activation_build_runs_in_an_older_torch(workspace, torch213_python):
    """The stable-ABI CPU build made with this venv's torch passes its tests in torch 2.13.0 too.
    --variant: the CUDA build cannot load in a CPU-only torch."""
    kernel = workspace / "kernels" / "activation"
    assert main(["test", str(kernel), "--variant", ACT_CPU, "--python", str(torch213_python)]) == 0


def test_huggingface_get_kernel_through_kbuild_hub_serve(workspace, tmp_path):
    """Publish the compiled CPU build over HTTP; Hugging Face's loader fetches and runs it."""
    pytest.importorskip("kernels")
    from hubserver import TOKEN, ServerThread

    server = ServerThread(tmp_path / "hub")
    try:
        env = {**os.environ, "HF_TOKEN": TOKEN, "HF_HUB_DISABLE_PROGRESS_BARS": "1"}
        kernel = workspace / "kernels" / "activation"
        # The workspace copy is not a git checkout, hence --allow-dirty.
        done = subprocess.run([sys.executable, "-m", "builder.commands.main", "publish", str(kernel), "--hub", server.url,
                               "--repo-id", "kb-org/activation", "--variant", ACT_CPU, "--allow-dirty"],
                              capture_output=True, text=True, env=env, timeout=600)
        assert done.returncode == 0, done.stderr
        script = (
            "import torch, kernels\n"
            "k = kernels.get_kernel('kb-org/activation', version=1, backend='cpu', trust_remote_code=True)\n"
            "x = torch.randn(16, 64)\n"
            "torch.testing.assert_close(k.silu_and_mul(x), torch.nn.functional.silu(x[:, :32]) * x[:, 32:])\n"
            "print('loaded', k.__name__)\n"
        )
        env.update(HF_ENDPOINT=server.url, HF_HOME=str(tmp_path / "hf-home"))
        env.pop("HF_HUB_DISABLE_TELEMETRY", None)  # kernels 0.17.2 builds a bad User-Agent with it set
        run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=600)
        assert run.returncode == 0, run.stderr[-3000:]
        assert "loaded _activation_cpu_" in run.stdout
    finally:
        server.stop()


def test_reduced_matrix_in_one_graph_with_a_provisioned_toolchain(workspace, capsys, monkeypatch, torch213_python):
    """CI's slice of the matrix in one `kbuild build`: this environment's torch 2.14 variants, the
    stable-ABI ones, and torch 2.13 cpu from a provisioned toolchain (the store that made
    torch213_python, so nothing is downloaded twice). Then each runs its tests in its own torch."""
    monkeypatch.setenv("KBUILD_TOOLCHAINS", str(torch213_python.parents[2]))
    old = "torch213-cxx11-cpu-x86_64-linux"
    wanted = [old, CPU, ACT_CPU] + ([CUDA, ACT_CUDA] if CUDA else [])
    code, output = run_build(capsys, str(workspace), "-j", "2", *[a for v in wanted for a in ("--variant", v)])
    assert code == 0, output
    built = {m[1] for m in re.finditer(r"^(?:built|unchanged)\s+\S+?/(\S+)", output, re.M)}
    assert built == set(wanted), output
    # Only the new variant compiles (both rmsnorm units); everything else is up to date.
    assert len(compile_lines(output)) == 2 and all(old in line for line in compile_lines(output)), output
    meta = json.loads((workspace / "kernels" / "rmsnorm" / "build" / old / "metadata.json").read_text())
    assert meta["backend"]["type"] == "cpu"
    rmsnorm = workspace / "kernels" / "rmsnorm"
    capsys.readouterr()
    assert main(["test", str(rmsnorm), "--python", str(torch213_python)]) == 0
    out = capsys.readouterr()
    assert re.search(rf"passed\s+rmsnorm/{old}", out.out + out.err)
    assert re.search(rf"left out\s+rmsnorm/{CPU} .*built for torch 2\.14, this is torch 2\.13: the loader would not "
                     "pick it here", out.out + out.err)
