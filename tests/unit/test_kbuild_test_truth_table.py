"""bench/gpu/kbuild_test_truth.py's table carries what `kbuild test` said of each variant, read from
the H100 run's own outputs (bench/gpu/results/run19/kbuild_test_truth/logs.tgz): a suite cut at
--timeout is "failed" with kbuild's reason and the counts it gave so far, not empty cells."""

from __future__ import annotations

import importlib.util
import tarfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LOGS = REPO / "bench" / "gpu" / "results" / "run19" / "kbuild_test_truth" / "logs.tgz"


@pytest.fixture(scope="module")
def truth():
    spec = importlib.util.spec_from_file_location("kbuild_test_truth", REPO / "bench" / "gpu" / "kbuild_test_truth.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def found(truth, tmp_path_factory):
    run = tmp_path_factory.mktemp("run")
    with tarfile.open(LOGS) as archive:
        # the archive is the repository's own; tarfile's filters exist from CPython 3.11.4 (a Debian 12 user has 3.11.2)
        archive.extractall(run, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
    return {(r["run"], r["variant"]): r for r in truth.rows(run)}


def test_a_suite_cut_at_the_timeout_carries_kbuild_tests_reason_and_counts(found, truth):
    row = found[("test-finegrained-fp8", "torch-cuda")]
    assert row["status"] == "failed"
    assert row["reason"] == "timed out after 200 s (39 passed, 0 failed, 0 skipped so far)"
    assert (row["passed"], row["failed"], row["skipped"], row["error"]) == (39, 0, 0, 0)
    assert "| failed | 39 | 0 | 0 |  | 200.1 | timed out after 200 s (39 passed, 0 failed, 0 skipped so far) |" \
        in truth.table([row])


def test_reasons_after_a_log_path_or_a_padded_time_are_kept(found):
    collect = found[("test-activation", "torch-stable-abi210-cu130-x86_64-linux")]
    assert collect["reason"].endswith("AttributeError: module 'kernels' has no attribute 'get_kernel'")
    assert collect["error"] == 1 and collect["reason"].startswith("1 error in 0.71s; ")
    left = found[("test-finegrained-fp8", "torch-rocm")]
    assert left["status"] == "left out" and left["reason"].startswith("built for rocm, this system uses cuda")
    passed = found[("test-esmfold2-trimul", "torch-cuda")]
    assert (passed["passed"], passed["reason"]) == (18, "18 passed in 11.22s")
