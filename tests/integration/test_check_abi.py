"""`kbuild check-abi`: built variants and single libraries read with the checks the build runs,
against what they claim (builder/stage/abi_report.py); the fatbin reader against what real nvcc
writes for each kind of arch."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from test_arch_selection_build import write_project

from builder.backends.cuda import CUDA
from builder.backends.cuda_fatbin import FatbinEntry
from builder.commands.main import main
from builder.toolchains.binary.elf import ELF
from kbuild.variants import detect_system

NVCC = shutil.which("nvcc") or "/usr/local/bin/nvcc"
needs_nvcc = pytest.mark.skipif(not Path(NVCC).exists(), reason="needs nvcc")


def run(capsys, *args) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["check-abi", *map(str, args)])
    out = capsys.readouterr()
    return code, out.out + out.err


@needs_nvcc
@pytest.mark.parametrize(("gencode", "expected"), [
    ("arch=compute_90,code=sm_90", [FatbinEntry("9.0", "cubin")]),
    ("arch=compute_90a,code=sm_90a", [FatbinEntry("9.0a", "cubin")]),
    ("arch=compute_100f,code=sm_100f", [FatbinEntry("10.0f", "cubin")]),
    ("arch=compute_80,code=compute_80", [FatbinEntry("8.0", "ptx")]),
])
def test_the_fatbin_reader_reads_what_nvcc_writes(tmp_path, gencode, expected):
    (tmp_path / "k.cu").write_text("__global__ void k(float* x) { x[0] = 1.0f; }\n")
    subprocess.run([NVCC, "-c", str(tmp_path / "k.cu"), "-o", str(tmp_path / "k.o"), f"-gencode={gencode}"],
                   check=True, capture_output=True)
    assert CUDA.device_code(tmp_path / "k.o", ELF) == expected


@pytest.fixture(scope="module")
def cuda_variant(tmp_path_factory) -> Path:
    system = detect_system()
    if system.backend != "cuda":
        pytest.skip("needs a CUDA build of torch and nvcc")
    project = write_project(tmp_path_factory.mktemp("abi") / "two-archs")
    assert main(["build", str(project), "--cuda-archs", "9.0a;10.0a", "--no-cache"]) == 0
    return project / "build" / system.compiled_variant().name


def test_a_built_cuda_variant_keeps_what_it_claims(cuda_variant, capsys):
    code, out = run(capsys, cuda_variant)
    assert code == 0, out
    assert "  CUDA: cubin 9.0a 10.0a" in out, out
    assert "  Python ABI: abi3, the limited API" in out and "ok: no violation of what it claims" in out, out
    code, out = run(capsys, cuda_variant, "--json")
    record = json.loads(out)
    assert record["ok"] and record["archs"] == ["9.0a", "10.0a"]
    library, = record["libraries"]
    assert library["cuda"] == {"cubin": ["9.0a", "10.0a"], "ptx": []} and library["undefined"] == []
    assert record["policy"] == json.loads((cuda_variant / "metadata.json").read_text())["abi"]["manylinux"]


def test_a_kernels_folder_checks_each_built_variant(cuda_variant, tmp_path, capsys):
    project = shutil.copytree(cuda_variant.parents[1], tmp_path / "two-archs")
    noarch = project / "build" / "torch-cuda"  # a Python-only variant beside it: no library to check
    noarch.mkdir()
    (noarch / "metadata.json").write_text('{"python-depends": []}')
    for path in (project, project / "build"):
        code, out = run(capsys, path)
        assert code == 0, out
        assert f"== {cuda_variant.name}\n" in out and "  CUDA: cubin 9.0a 10.0a" in out, out
        assert "== torch-cuda: Python only, no libraries to check" in out, out
        assert out.rstrip().endswith("1 compiled variant(s) checked: each keeps what it claims"), out
    code, out = run(capsys, project, "--json")
    assert code == 0 and [r["variant"] for r in json.loads(out)] == [cuda_variant.name], out
    # one variant that breaks its claim fails the whole folder, and the summary counts it
    metadata = json.loads((project / "build" / cuda_variant.name / "metadata.json").read_text())
    metadata["backend"]["archs"] = ["9.0a"]
    (project / "build" / cuda_variant.name / "metadata.json").write_text(json.dumps(metadata))
    code, out = run(capsys, project)
    assert code == 1 and out.rstrip().endswith("1 compiled variant(s) checked: 1 break what they claim"), out
    shutil.rmtree(project / "build")
    code, out = run(capsys, project)
    assert code == 2 and f"{project}/build: no built variant here" in out and f"kbuild build {project}" in out, out


def test_archs_metadata_json_does_not_list_are_a_violation(cuda_variant, tmp_path, capsys):
    copy = tmp_path / cuda_variant.name
    shutil.copytree(cuda_variant, copy)
    metadata = json.loads((copy / "metadata.json").read_text())
    metadata["backend"]["archs"] = ["9.0a", "12.0+PTX"]
    (copy / "metadata.json").write_text(json.dumps(metadata))
    code, out = run(capsys, copy)
    assert code == 1, out
    assert "metadata.json lists CUDA arch 12.0, but no library carries a 12.0 cubin" in out, out
    assert "metadata.json lists 12.0+PTX, but no library carries 12.0 PTX" in out, out
    assert "the libraries carry cubins for 10.0a, which metadata.json does not list" in out, out


def test_a_policy_below_the_floor_is_a_violation_naming_the_symbol(cuda_variant, capsys):
    library = next(cuda_variant.glob("*.so"))
    code, out = run(capsys, library, "--manylinux", "2_5")
    floor = json.loads((cuda_variant / "metadata.json").read_text())["abi"]["manylinux"]
    if floor == "manylinux_2_5_x86_64":
        assert code == 0, out  # nothing newer to need
    else:
        assert code == 1 and "above manylinux_2_5_x86_64" in out, out


def test_a_stable_abi_library_that_uses_torchs_cxx_api_is_a_violation(tmp_path, capsys):
    folder = tmp_path / "torch-stable-abi210-cpu-x86_64-linux"
    folder.mkdir()
    (tmp_path / "x.cpp").write_text("namespace c10 { void warn(int); }\nvoid f() { c10::warn(1); }\n")
    subprocess.run(["g++", "-shared", "-fPIC", str(tmp_path / "x.cpp"), "-o", str(folder / "_x_cpu_abc.abi3.so")],
                   check=True)
    code, out = run(capsys, folder)
    assert code == 1, out
    assert "  torch ABI: stable, BROKEN" in out, out
    assert "is a stable-ABI variant but uses torch's C++ API: _ZN3c104warnEi" in out, out
    assert "cannot load: undefined symbol(s) _ZN3c104warnEi" in out, out


@pytest.mark.parametrize(("args", "message"), [
    (["{tmp}/nowhere"], "{tmp}/nowhere: no such file or folder (expected a built variant folder or a .so)"),
    (["{tmp}/empty"], "{tmp}/empty: no .so in this folder (expected a built variant folder, build/<variant>/)"),
    (["{tmp}/not-elf.so"], "{tmp}/not-elf.so: not a readable ELF shared library"),
    (["{tmp}/not-elf.so", "--manylinux", "2_99"], 'kbuild: error: --manylinux: unknown manylinux policy "2_99"'),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, args, message):
    (tmp_path / "not-elf.so").write_text("not an ELF file\n")
    (tmp_path / "empty").mkdir()
    code, out = run(capsys, *(a.format(tmp=tmp_path) for a in args))
    assert code == 2, out
    assert message.format(tmp=tmp_path) in out and "Traceback" not in out, out
    assert len(out.strip().splitlines()) <= 2, out  # the error, and at most its hint
