"""`kbuild test` running real kernel suites: the variant under test, the kernel's own pytest config, timeouts."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from builder.commands.main import main
from corpus import corpus_kernel

REPO_ID = "kernels-community/relu"
IGNORE = shutil.ignore_patterns("build", ".kbuild", "__pycache__", ".pytest_cache")

# Added to the copy's tests/: a fixture from the kernel's own conftest.py, and a test that says
# what Hugging Face's loader loaded and which environment it ran in (printed: run with -s).
OWN_CONFTEST = '''\
import pytest


@pytest.fixture
def own_conftest():
    return "tests/conftest.py"
'''
PROBE_TEST = '''\
import os
from pathlib import Path

import kernels


def test_get_kernel_loads_the_variant_under_test(own_conftest):
    relu = kernels.get_kernel("kernels-community/relu", version=1)
    print("loaded from", Path(relu.__file__).parent.resolve())
    print("LOCAL_KERNELS=" + os.environ.get("LOCAL_KERNELS", "<unset>"))
    print("HF_HUB_OFFLINE=" + os.environ.get("HF_HUB_OFFLINE", "<unset>"))
    print("CUDA_VISIBLE_DEVICES=" + os.environ.get("CUDA_VISIBLE_DEVICES", "<unset>"))
    print("fixture from", own_conftest)
    try:
        from caller_path_module import VALUE  # on the caller's PYTHONPATH, when the test sets one
    except ImportError:
        VALUE = "missing"
    print("caller path:", VALUE)
'''


# --- kbuild test, for real -------------------------------------------------------------------

def hostile_parent(folder: Path) -> Path:
    """A folder whose pytest configuration breaks every run that picks it up."""
    folder.mkdir(parents=True)
    (folder / "pytest.ini").write_text("[pytest]\naddopts = --this-option-does-not-exist\n")
    (folder / "conftest.py").write_text("raise RuntimeError('a parent folder conftest.py was loaded')\n")
    return folder


@pytest.fixture(scope="module")
def cpu_variant() -> str:
    pytest.importorskip("torch")
    pytest.importorskip("kernels")
    from kbuild.variants import detect_system

    return detect_system("cpu").compiled_variant().name


@pytest.fixture(scope="module")
def built_relu(tmp_path_factory, cpu_variant) -> Path:
    """The corpus relu kernel, its tests plus the probe, its CPU variant built."""
    relu = corpus_kernel("relu")
    kernel = hostile_parent(tmp_path_factory.mktemp("built") / "outer") / "relu"
    shutil.copytree(relu, kernel, ignore=IGNORE)
    (kernel / "tests" / "conftest.py").write_text(OWN_CONFTEST)
    (kernel / "tests" / "test_kbuild_probe.py").write_text(PROBE_TEST)
    assert main(["build", str(kernel), "--variant", cpu_variant]) == 0
    assert (kernel / "build" / cpu_variant / "metadata.json").is_file()
    return kernel


@pytest.fixture
def relu(built_relu, tmp_path) -> Path:
    """A copy of the built kernel (build/ included) of this test's own, under a hostile parent."""
    kernel = hostile_parent(tmp_path / "outer") / "relu"
    shutil.copytree(built_relu, kernel, ignore=shutil.ignore_patterns(".kbuild", "__pycache__"))
    return kernel


def kbuild_test(kernel: Path, variant: str, *pytest_args: str) -> tuple[int, str]:
    code = main(["test", str(kernel), "--variant", variant, *(("--", *pytest_args) if pytest_args else ())])
    log = kernel / ".kbuild" / variant / "test.log"
    return code, log.read_text() if log.is_file() else "(no test.log)"


def test_get_kernel_tests_get_the_variant_under_test(relu, cpu_variant, monkeypatch, tmp_path):
    # The caller's own overrides: another repo's stays, a stale one for relu is replaced.
    monkeypatch.setenv("LOCAL_KERNELS", f"other-org/other=/elsewhere:{REPO_ID}=/nowhere")
    # and the caller's PYTHONPATH stays behind the variant's folder (packages the suites import)
    (tmp_path / "extra").mkdir()
    (tmp_path / "extra" / "caller_path_module.py").write_text('VALUE = "kept"\n')
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "extra"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)  # a user's shell: Python writes bytecode
    variant = (relu / "build" / cpu_variant).resolve()
    code, log = kbuild_test(relu, cpu_variant, "-s")
    assert code == 0, log
    # nothing added to the variant (digest-checked, published) or to the kernel's tests/
    assert sorted(p.relative_to(relu).as_posix() for p in relu.rglob("__pycache__")) == []
    # test_relu.py's two tests (each runs kernels.get_kernel's module) and the probe.
    assert re.search(r"^3 passed\b", log, re.M), log
    assert f"loaded from {variant}\n" in log, log
    assert f"LOCAL_KERNELS=other-org/other=/elsewhere:{REPO_ID}={variant}\n" in log, log
    assert "HF_HUB_OFFLINE=1\n" in log, log
    assert "CUDA_VISIBLE_DEVICES=\n" in log, log  # a CPU variant's suite sees no GPU
    assert "caller path: kept\n" in log, log
    assert "fixture from tests/conftest.py" in log, log  # the kernel's own conftest.py still loads
    assert "this-option-does-not-exist" not in log and "parent folder conftest.py" not in log, log


def test_the_kernels_own_pytest_config_applies(relu, cpu_variant, monkeypatch):
    monkeypatch.delenv("LOCAL_KERNELS", raising=False)
    (relu / "pyproject.toml").write_text(
        "[tool.pytest.ini_options]\n"
        'addopts = "-rA --strict-markers"\n'
        'markers = ["kernels_ci: run in the kernels CI"]\n'
    )
    code, log = kbuild_test(relu, cpu_variant)
    assert code == 0, log
    assert "PASSED tests/test_relu.py::test_relu_layer" in log, log  # -rA from the kernel's addopts
    assert "PytestUnknownMarkWarning" not in log, log  # its markers are registered
    assert re.search(r"^3 passed\b", log, re.M), log


def test_without_a_repo_id_hugging_faces_loader_is_not_redirected(relu, cpu_variant, monkeypatch):
    """No [general.hub] repo-id: kbuild sets neither LOCAL_KERNELS nor HF_HUB_OFFLINE, so the
    relu tests' get_kernel goes to the Hub; only the tests that import the kernel by name run."""
    monkeypatch.delenv("LOCAL_KERNELS", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    manifest = relu / "build.toml"
    manifest.write_text(re.sub(r"\[general\.hub\]\nrepo-id = .*\n", "", manifest.read_text()))
    (relu / "tests" / "test_relu.py").unlink()
    (relu / "tests" / "test_kbuild_probe.py").write_text(
        "import os\n\n\n"
        "def test_environment(own_conftest):\n"
        "    import relu\n"
        "    assert relu.relu is not None\n"
        "    print('LOCAL_KERNELS=' + os.environ.get('LOCAL_KERNELS', '<unset>'))\n"
        "    print('HF_HUB_OFFLINE=' + os.environ.get('HF_HUB_OFFLINE', '<unset>'))\n"
    )
    code, log = kbuild_test(relu, cpu_variant, "-s")
    assert code == 0, log
    assert "LOCAL_KERNELS=<unset>\n" in log and "HF_HUB_OFFLINE=<unset>\n" in log, log
    assert re.search(r"^1 passed\b", log, re.M), log


# --- a suite cut short keeps its log ---------------------------------------------------------

SLOW_TESTS = '''\
import time


def test_one():
    pass


def test_two():
    pass


def test_hangs():
    time.sleep(600)
'''


def test_a_suite_that_times_out_keeps_its_log_and_says_how_far_it_got(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("KBUILD_CACHE", str(tmp_path / "cache"))
    assert main(["init", "slowk", "--backends", "triton", "--dir", str(tmp_path / "slowk")]) == 0
    kernel = tmp_path / "slowk"
    assert main(["build", str(kernel)]) == 0
    for old in (kernel / "tests").glob("test_*.py"):
        old.unlink()
    (kernel / "tests" / "test_slow.py").write_text(SLOW_TESTS)
    capsys.readouterr()
    assert main(["test", str(kernel), "--timeout", "20"]) != 0
    out = "".join(capsys.readouterr())
    assert re.search(r"failed\s+slowk/torch-cuda .*timed out after 20 s \(2 passed, 0 failed, 0 skipped so far\)", out), out
    log = (kernel / ".kbuild" / "torch-cuda" / "test.log").read_text()
    assert log.splitlines()[-1] == "kbuild: pytest stopped after 20 s" and ".." in log


# --- the variant under test, never a source folder; calls the suite's loader refuses ----------------

def test_a_source_folder_named_like_the_package_does_not_stand_in_for_the_variant(relu, cpu_variant, monkeypatch):
    """flash-mla keeps its upstream package, `flash_mla/`, at the project root: pytest's working
    folder, first on sys.path. The suite must still import the staged variant."""
    monkeypatch.delenv("LOCAL_KERNELS", raising=False)
    (relu / "relu").mkdir()
    (relu / "relu" / "__init__.py").write_text("raise ImportError('the source folder relu/ was imported')\n")
    (relu / "tests" / "test_which_relu.py").write_text(
        "from pathlib import Path\nimport relu\n\n\ndef test_it_is_the_variant():\n"
        "    print('relu from', Path(relu.__file__).parent.resolve())\n")
    code, log = kbuild_test(relu, cpu_variant, "-s")
    assert code == 0, log
    assert f"relu from {(relu / 'build' / cpu_variant).resolve()}\n" in log, log
    assert "source folder relu/ was imported" not in log, log


UNVERSIONED_CALLS = '''\
import kernels


def test_loads_without_a_version():
    kernels.get_kernel("kernels-community/relu")
'''


def test_an_unversioned_hugging_face_get_kernel_is_a_skip_that_says_why(relu, cpu_variant, capsys, monkeypatch):
    monkeypatch.delenv("LOCAL_KERNELS", raising=False)
    (relu / "tests" / "test_unversioned.py").write_text(UNVERSIONED_CALLS)
    (relu / "tests" / "test_unversioned_module.py").write_text(
        'import kernels\n\nRELU = kernels.get_kernel("kernels-community/relu")\n\n\ndef test_never_runs():\n    pass\n')
    capsys.readouterr()
    code, log = kbuild_test(relu, cpu_variant)
    out = "".join(capsys.readouterr())
    assert code == 0, log
    assert re.search(r"^3 passed, 2 skipped\b", log, re.M), log
    why = "calls Hugging Face's kernels.get_kernel without version= or revision="
    assert f"skipped 1: tests/test_unversioned.py:5: {why}" in out, out
    assert f"skipped 1: tests/test_unversioned_module.py:3: {why}" in out, out


def test_a_collection_error_is_named_with_its_first_line(relu, cpu_variant, capsys, monkeypatch):
    monkeypatch.delenv("LOCAL_KERNELS", raising=False)
    (relu / "tests" / "test_broken.py").write_text("import a_module_nobody_has\n")
    capsys.readouterr()
    code, log = kbuild_test(relu, cpu_variant)
    out = "".join(capsys.readouterr())
    assert code == 1, log
    # no case ran: the suite could not be collected, which is not "failed"
    assert re.search(rf"^could not collect relu/{cpu_variant} .*error collecting \(importing\) tests/test_broken.py: "
                     r"ModuleNotFoundError: No module named 'a_module_nobody_has'$", out, re.M), out


SCRIPT_TEST = '''\
import torch


def test_scaled(t: int, scale: float):
    assert torch.ones(t).mul(scale).sum() == t * scale


def test_a_real_one(missing_fixture):
    pass


if __name__ == "__main__":
    for t in (1, 2):
        test_scaled(t, 2.0)
'''


def test_a_scripts_routine_is_skipped_saying_so_but_a_missing_fixture_is_still_an_error(relu, cpu_variant, capsys,
                                                                                        monkeypatch):
    """flash-mla's tests are scripts: `test_flash_mla(t)` is called by the module's __main__ block."""
    monkeypatch.delenv("LOCAL_KERNELS", raising=False)
    (relu / "tests" / "test_script.py").write_text(SCRIPT_TEST)
    capsys.readouterr()
    code, log = kbuild_test(relu, cpu_variant)
    out = "".join(capsys.readouterr())
    assert code == 1, log
    assert ("skipped 1: tests/test_script.py:4: test_script.py is a script: test_scaled needs 't', which its "
            "__main__ block passes and no fixture provides") in out, out
    # a test that is not the script's routine keeps its error, even in a script
    assert "ERROR tests/test_script.py::test_a_real_one" in log, log
