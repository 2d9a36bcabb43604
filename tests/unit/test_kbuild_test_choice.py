"""Which built variants `kbuild test` runs, judged for a described machine (the H200 of issue 46,
a machine without a GPU), and how it tells a suite that could not be collected from one whose
cases failed. Pure: the machine is a SystemInfo as kbuild.variants.detect_system describes one;
tests/integration/test_kbuild_test_truth.py runs real suites through the same code on this one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from builder.verify.kernel_tests import _outcome_line, not_collected
from builder.verify.variant_choice import HIDE_GPUS, Target, check_named, choose, place
from kbuild.variants import SystemInfo

# activation built at --cuda-archs 9.0a beside its CPU variant, and a Triton kernel's noarch builds
BUILT = {
    "torch211-cxx11-cu130-x86_64-linux": {"backend": {"type": "cuda", "archs": ["9.0a"]}},
    "torch211-cxx11-cpu-x86_64-linux": {"backend": {"type": "cpu", "archs": []}},
    "torch213-cxx11-cpu-x86_64-linux": {"backend": {"type": "cpu", "archs": []}},
    "torch-cuda": {}, "torch-cpu": {}, "torch-rocm": {}, "torch-xpu": {}, "torch-metal": {},
}
H200 = SystemInfo((2, 11), "cuda", (13, 0), "x86_64", "linux", device_visible=True, gpu_arch="9.0", python=(3, 12))
NO_GPU = SystemInfo((2, 11), "cuda", (13, 0), "x86_64", "linux", device_visible=False, python=(3, 12))


@pytest.fixture
def build(tmp_path) -> Path:
    for name, meta in BUILT.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "metadata.json").write_text(json.dumps(meta))
    return tmp_path


def decide(build: Path, system: SystemInfo, named: bool = False, only=None) -> dict[str, tuple]:
    folders = sorted(p for p in build.iterdir() if only is None or p.name in only)
    return {c.variant.name: (c.hide_gpus, c.left_out, c.forced)
            for c in choose(build, folders, Target(system, "2.11.0+cu130"), named)}


def test_on_a_gpu_machine_what_the_loader_picks_runs_and_the_cpu_variants_run_with_the_gpu_hidden(build):
    got = decide(build, H200)
    tested = {name: hide for name, (hide, left_out, _) in got.items() if not left_out}
    assert tested == {"torch211-cxx11-cu130-x86_64-linux": False, "torch-cuda": False,
                      "torch211-cxx11-cpu-x86_64-linux": True, "torch-cpu": True}
    left_out = {name: why for name, (_, why, _) in got.items() if why}
    assert left_out["torch-rocm"] == ("built for rocm, this system uses cuda: the loader would not pick it here "
                                      "(--variant torch-rocm tests it anyway)")
    assert left_out["torch-xpu"].startswith("built for xpu, this system uses cuda: ")
    assert left_out["torch-metal"].startswith("built for metal, this system uses cuda: ")
    assert left_out["torch213-cxx11-cpu-x86_64-linux"].startswith("built for torch 2.13, this is torch 2.11: ")


def test_the_gpu_arch_a_variant_was_built_for_counts(build):
    """The loader's metadata check: a build for 9.0a does not run on a capability 8.0 GPU."""
    from dataclasses import replace

    got = decide(build, replace(H200, gpu_arch="8.0"))
    assert got["torch211-cxx11-cu130-x86_64-linux"][1], got
    assert not got["torch-cuda"][1]


def test_without_a_gpu_cuda_variants_still_run_and_other_backends_are_left_out(build):
    got = decide(build, NO_GPU)
    tested = {name: hide for name, (hide, left_out, _) in got.items() if not left_out}
    assert tested == {"torch211-cxx11-cu130-x86_64-linux": False, "torch-cuda": False,
                      "torch211-cxx11-cpu-x86_64-linux": True, "torch-cpu": True}


def test_variant_forces_one_the_loader_would_not_pick_and_says_why(build):
    got = decide(build, H200, named=True, only={"torch-rocm", "torch213-cxx11-cpu-x86_64-linux"})
    assert got == {"torch-rocm": (False, "", "built for rocm, this system uses cuda"),
                   "torch213-cxx11-cpu-x86_64-linux": (True, "", "built for torch 2.13, this is torch 2.11")}


def test_a_folder_that_is_no_variant_name_is_left_out_saying_so(build):
    (build / "my-build").mkdir()
    (build / "my-build" / "metadata.json").write_text("{}")
    _, why, _ = decide(build, H200, only={"my-build"})["my-build"]
    assert why.startswith("not a variant name: 'my-build'")


# --- could not collect, apart from failed ------------------------------------------------------

COLLECTION_ERROR = (
    "______________ ERROR collecting tests/test_routing.py ______________\n"
    "ImportError while importing test module '/k/tests/test_routing.py'.\n"
    "E   ModuleNotFoundError: No module named 'triton_kernels'\n"
    "!!!!!!!!!!!!!!!!!!!! Interrupted: 7 errors during collection !!!!!!!!!!!!!!!!!!!!\n"
    "7 errors in 3.10s\n")
CONFTEST_ERROR = (
    "ImportError while loading conftest '/k/tests/conftest.py'.\n"
    "tests/conftest.py:2: in <module>\n    import triton\n"
    "E   ModuleNotFoundError: No module named 'triton'\n")


def test_a_suite_that_cannot_be_collected_is_told_from_one_whose_cases_fail():
    assert not_collected(2, COLLECTION_ERROR)
    assert not_collected(4, CONFTEST_ERROR)
    assert not not_collected(1, "2 failed, 3 passed in 1.00s\n")
    # collected with --continue-on-collection-errors: cases ran, so they are counted as ran
    assert not not_collected(1, COLLECTION_ERROR.replace("!!!!!!!!!!!!!!!!!!!! Interrupted: 7 errors during "
                                                         "collection !!!!!!!!!!!!!!!!!!!!\n", ""))
    # a pytest argument the suite does not know is not the suite's collection
    assert not not_collected(4, "ERROR: usage: pytest [options]\npytest: error: unrecognized arguments: --nope\n")
    assert not not_collected(2, "!!!!!! KeyboardInterrupt !!!!!!\n")


def test_a_conftest_that_cannot_be_loaded_is_named_with_its_first_error_line():
    assert _outcome_line(CONFTEST_ERROR, Path("/k")) == ("error loading tests/conftest.py: ModuleNotFoundError: "
                                                         "No module named 'triton'")


@pytest.mark.parametrize("runs", ["suite", "benchmarks"])
def test_kbuild_test_and_kbuild_bench_place_each_kind_of_variant_alike(runs):
    """One rule for where a chosen variant runs, for both commands (only the words name which)."""
    cases = {  # (variant, hide_gpus, has_gpu) -> (device, env, where, gpu_missing)
        ("torch214-cxx11-cpu-x86_64-linux", True, True): ("cpu", HIDE_GPUS, f"on cpu (no GPU visible to the {runs})", False),
        ("torch-cpu", True, True): ("cpu", HIDE_GPUS, f"on cpu (no GPU visible to the {runs})", False),
        ("torch214-cxx11-cpu-x86_64-linux", False, False): ("cpu", {}, "on cpu", False),
        ("torch-universal", False, False): ("cpu", {}, "on cpu", False),
        ("torch214-cxx11-cu130-x86_64-linux", False, True): ("cuda", {}, "on cuda", False),
        ("torch214-cxx11-rocm71-x86_64-linux", False, True): ("cuda", {}, "on cuda", False),
        ("torch-cuda", False, True): ("cuda", {}, "on cuda", False),
        ("torch-rocm", False, True): ("cuda", {}, "on cuda", False),
        ("torch-cuda", False, False): ("cpu", {"TRITON_INTERPRET": "1"}, "on cpu (Triton interpreter)", False),
        ("torch-rocm", False, False): ("cpu", {"TRITON_INTERPRET": "1"}, "on cpu (Triton interpreter)", False),
        ("torch214-cxx11-cu130-x86_64-linux", False, False): ("cuda", {}, "without a GPU", True),
    }
    for (variant, hide, gpu), (device, env, where, missing) in cases.items():
        placed = place(variant, hide, gpu, runs)
        assert (placed.device, placed.env, placed.where, placed.gpu_missing) == (device, env, where, missing), variant


def test_a_variant_name_built_for_no_kernel_is_one_error_with_the_nearest_or_what_is_built(tmp_path):
    from kbuild_common.errors import UsageError

    cpu, cuda = "torch214-cxx11-cpu-x86_64-linux", "torch214-cxx11-cu130-x86_64-linux"
    one, two = tmp_path / "one", tmp_path / "two"
    for kernel, variant in ((one, cpu), (two, cuda)):
        (kernel / "build" / variant).mkdir(parents=True)
        (kernel / "build" / variant / "metadata.json").write_text("{}")
    check_named(tmp_path, [one, two], (cpu, cuda))  # each built for one of them: fine
    check_named(one, [one], ())
    with pytest.raises(UsageError) as typo:
        check_named(one, [one], (cpu, "torch214-cxx11-cpu-x86-64-linux"))
    assert str(typo.value) == f"{one}: no built variant named torch214-cxx11-cpu-x86-64-linux in {one / 'build'}"
    assert typo.value.hint == f"did you mean --variant {cpu}?"
    with pytest.raises(UsageError) as other:
        check_named(tmp_path, [one, two], ("torch-metal",))
    assert str(other.value) == f"{tmp_path}: no kernel there has a built variant named torch-metal"
    assert other.value.hint == f"built there: {cpu}, {cuda}"
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(UsageError) as none:
        check_named(empty, [empty], (cpu,))
    assert none.value.hint == f"run kbuild build {empty} first"
