"""`kbuild test` tells the truth about real suites (issue 46): a CPU variant's suite sees no GPU;
only the variants the loader would pick here run, the others are left out saying why, and
`--variant` runs one anyway; a suite that cannot be collected is told from one whose cases fail;
a kernel without tests/ is no error.

The kernel is Python-only (tests/helpers/seen_kernel.py: its five noarch variants build in about
a second) and its suite records what it saw (the GPU variables, torch's device count, the device
it chose) into a file per variant that these tests read. The GPU machine's side of the same choice
is judged in tests/unit/test_kbuild_test_choice.py and run on an H200 by bench/gpu/kbuild_test_truth.sh.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from builder.commands.main import main
from seen_kernel import HIDDEN, WATCHED, build_seen, fresh_copy, seen

torch = pytest.importorskip("torch")

SUITE = f'''import json
import os
from pathlib import Path

import pytest
import torch

import seen

VARIANT = Path(seen.__file__).resolve().parent.name


def test_records_what_it_saw():
    record = {{name: os.environ.get(name) for name in {WATCHED!r}}}
    record["device_count"] = torch.cuda.device_count()
    record["device"] = "cuda" if torch.cuda.is_available() else "cpu"  # where a suite puts its tensors
    (Path(__file__).parents[1] / "records" / f"{{VARIANT}}.json").write_text(json.dumps(record))


@pytest.mark.skipif(VARIANT != "torch-cpu", reason="for the CPU variant")
def test_the_suite_asks_for_a_gpu():
    torch.ones(2, device="cuda")  # a suite with no CPU path, as activation's


@pytest.mark.skipif(VARIANT != "torch-cpu" or os.environ.get("SEEN_VARIANT_GPU") != "1", reason="asked for by one test")
def test_the_variant_asks_for_a_gpu():
    seen.on_the_gpu()
'''


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    return build_seen(tmp_path_factory.mktemp("truth"), {"tests/test_seen.py": SUITE})


@pytest.fixture
def kernel(built, tmp_path, monkeypatch) -> Path:
    """A copy of the built kernel of this test's own; the caller's GPU variables unset."""
    return fresh_copy(built, tmp_path, monkeypatch)


def kbuild_test(capsys, *args: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["test", *args])
    return code, "".join(capsys.readouterr())


def test_a_cpu_variant_runs_with_the_gpus_hidden_and_other_backends_are_left_out(kernel, capsys):
    code, out = kbuild_test(capsys, str(kernel))
    assert code == 0, out
    saw = seen(kernel)
    assert set(saw) == {"torch-cpu", "torch-cuda"}, out
    assert saw["torch-cpu"] == {**HIDDEN, "KBUILD_TEST_DEVICE": "cpu", "TRITON_INTERPRET": None,
                                "device_count": 0, "device": "cpu"}, out
    assert "testing seen/torch-cpu on cpu (no GPU visible to the suite)" in out, out
    # the Triton variant keeps the machine's devices (none here: Triton's interpreter)
    assert saw["torch-cuda"]["CUDA_VISIBLE_DEVICES"] is None, saw
    if not torch.cuda.is_available():
        assert saw["torch-cuda"]["TRITON_INTERPRET"] == "1" and saw["torch-cuda"]["device"] == "cpu", saw
    for backend in ("rocm", "xpu", "metal"):
        assert re.search(rf"^left out +seen/torch-{backend} .*built for {backend}, this system uses cuda: the loader "
                         rf"would not pick it here \(--variant torch-{backend} tests it anyway\)$", out, re.M), out
    # the suite's own demand for a GPU is no failure of the CPU variant: a skip that says why
    assert re.search(r"^passed +seen/torch-cpu .* 1 passed, 2 skipped in ", out, re.M), out
    assert re.search(r"skipped 1: tests/test_seen.py:\d+: the suite asks torch for a GPU, which kbuild hides while "
                     "it tests a CPU variant", out), out
    assert "kbuild test: 2 passed, 3 left out" in out, out


def test_variant_runs_what_it_names_and_a_cpu_variants_own_demand_for_a_gpu_is_its_failure(kernel, capsys,
                                                                                           monkeypatch):
    """torch-rocm runs although the loader would not pick it here, saying why; torch-cpu still runs
    with the GPUs hidden, and where its own code (not the suite's) asks for a GPU, that fails."""
    monkeypatch.setenv("SEEN_VARIANT_GPU", "1")
    code, out = kbuild_test(capsys, str(kernel), "--variant", "torch-rocm", "--variant", "torch-cpu",
                            "--", "-k", "records or variant_asks")
    assert code == 1, out
    assert re.search(r"testing seen/torch-rocm .*, as --variant asks: the loader would not pick it here "
                     r"\(built for rocm, this system uses cuda\)", out), out
    assert re.search(r"^passed +seen/torch-rocm ", out, re.M) and "left out" not in out, out
    saw = seen(kernel)
    assert saw["torch-rocm"]["CUDA_VISIBLE_DEVICES"] is None and saw["torch-cpu"]["CUDA_VISIBLE_DEVICES"] == "", saw
    assert re.search(r"^failed +seen/torch-cpu .*1 failed, 1 passed", out, re.M), out
    log = (kernel / ".kbuild" / "torch-cpu" / "test.log").read_text()
    assert "FAILED tests/test_seen.py::test_the_variant_asks_for_a_gpu" in log and "seen.on_the_gpu()" in log, log
    assert "kbuild test: 1 passed, 1 failed" in out, out


def test_a_suite_that_cannot_be_collected_is_counted_apart(kernel, capsys):
    (kernel / "tests" / "test_seen.py").unlink()
    (kernel / "tests" / "test_upstream.py").write_text("from triton_kernels_upstream import routing\n")
    code, out = kbuild_test(capsys, str(kernel), "--variant", "torch-cpu")
    assert code == 1, out
    assert re.search(r"^could not collect seen/torch-cpu .*error collecting \(importing\) tests/test_upstream.py: "
                     r"ModuleNotFoundError: No module named 'triton_kernels_upstream'$", out, re.M), out
    assert "kbuild test: 1 could not collect" in out, out


def test_a_kernel_without_tests_is_no_error_but_a_mistyped_path_is(kernel, tmp_path, capsys):
    shutil.rmtree(kernel / "tests")
    code, out = kbuild_test(capsys, str(kernel))
    assert code == 0, out
    assert re.search(rf"^no tests +seen/- .*no tests/ folder in {re.escape(str(kernel))}: nothing to test$", out,
                     re.M), out
    assert "kbuild test: 1 without tests/" in out and "Traceback" not in out, out
    code, out = kbuild_test(capsys, str(tmp_path / "seeen"))
    assert code == 2 and f"kbuild: error: {tmp_path / 'seeen'}: not a folder" in out, out


def test_when_nothing_built_can_run_here_that_is_an_error(kernel, capsys):
    for name in ("torch-cpu", "torch-cuda"):
        shutil.rmtree(kernel / "build" / name)
    code, out = kbuild_test(capsys, str(kernel))
    assert code == 1, out
    assert "kbuild test: 3 left out" in out and "kbuild: error: no variant was tested: none is built, or none can " \
        "run here" in out, out
    assert "--variant V for one the loader would not pick here" in out and not list(kernel.glob(".kbuild/*/test.log"))
