"""Integration: kbuild's loader and Hugging Face's kernels 0.19.1 take the same variant from the same
names. One table of systems and variant names (legacy and 0.19 forms, stable ABI, tvm-ffi, SDK,
noarch, Python minimums, abi3/abi3t, ROCm, XPU, CANN, Metal); each case is judged by
kbuild.choice.resolve here and by kernels 0.19.1's own `_resolve_variant_for_system` in the
kernels-0.19 environment (tests/helpers/hf_variant_order.py, one subprocess for all).

kernels sorts stably, so the names go to it in kbuild's order: it gives that order back exactly
when kbuild's is one of its own (names that tie, one build under both name forms, keep kbuild's
by-name order), and the choice is the first of them.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import asdict, replace
from pathlib import Path

import pytest

import hf_envs
from kbuild.choice import resolve
from kbuild.variants import SystemInfo

HELPER = Path(__file__).resolve().parents[1] / "helpers" / "hf_variant_order.py"

CUDA130 = SystemInfo((2, 11), "cuda", (13, 0), "x86_64", "linux", python=(3, 11), tvm_ffi=(0, 1))
CUDA131 = replace(CUDA130, compute_version=(13, 1), tvm_ffi=None)
CPU213 = SystemInfo((2, 13), "cpu", None, "x86_64", "linux", python=(3, 11))

EVERY_FORM = [
    "torch-stable-abi-2.10-cuda-13.0-cpython-3.10-abi3-x86_64-linux", "torch-stable-abi210-cu130-x86_64-linux",
    "torch-stable-abi29-cu130-x86_64-linux", "torch-stable-abi212-cu130-x86_64-linux",
    "torch211-cu130-x86_64-linux", "torch-2.11-cuda-13.0-cpython-3.9-abi3-x86_64-linux",
    "torch211-cxx11-cu130-x86_64-linux", "torch-2.11-cxx11-cuda-13.0-cpython-3.9-abi3-x86_64-linux",
    "torch211-cxx98-cu130-x86_64-linux", "torch211-cxx11-cu128-x86_64-linux", "torch211-cxx11-cu131-x86_64-linux",
    "torch210-cxx11-cu130-x86_64-linux", "torch211-cxx11-cu130-aarch64-linux",
    "tvm-ffi01-cu130-x86_64-linux", "tvm-ffi-0.1-cuda-13.0-cpython-3.9-abi3-x86_64-linux", "tvm-ffi02-cu130-x86_64-linux",
    "sdk-cuda-13.0-cpython-3.10-abi3-x86_64-linux", "sdk-cpython-3.10-abi3-x86_64-linux", "sdk-cuda", "sdk", "sdk-cpu",
    "torch-2.11-cuda-13.0-cpython-3.12-abi3-x86_64-linux", "torch-2.11-cuda-13.0-cpython-3.15-abi3t-x86_64-linux",
    "torch-cuda", "torch-cpu", "torch-universal", "torch-rocm", "mlx-metal",
    "torch211-cxx11-cpu-x86_64-linux", "torch-stable-abi210-cpu-x86_64-linux",
    "torch211-cxx11-rocm63-x86_64-linux", "torch-npu", "README.md",
]

CASES = {
    # Hugging Face's own example system: everything above judged at once
    "cuda-13.0": (CUDA130, EVERY_FORM),
    "cuda-13.0, no tvm-ffi": (replace(CUDA130, tvm_ffi=None), EVERY_FORM),
    # the newest ABI before the closest CUDA minor, then the closest minor
    "cuda-13.1 minors": (CUDA131, [
        "torch-stable-abi29-cu131-x86_64-linux", "torch-stable-abi210-cu130-x86_64-linux",
        "torch-stable-abi-2.10-cuda-13.1-cpython-3.9-abi3-x86_64-linux", "torch-stable-abi210-cu132-x86_64-linux",
        "torch211-cxx11-cu130-x86_64-linux", "torch211-cxx11-cu131-x86_64-linux", "torch211-cu130-x86_64-linux",
        "torch-2.11-cuda-13.1-cpython-3.11-abi3-x86_64-linux", "torch-2.11-cuda-13.1-cpython-3.10-abi3-x86_64-linux",
    ]),
    "compiled only, cuda-13.1": (CUDA131, [
        "torch211-cxx11-cu130-x86_64-linux", "torch211-cxx11-cu131-x86_64-linux", "torch211-cxx11-cu126-x86_64-linux",
        "torch-cuda", "torch-universal",
    ]),
    # what kbuild builds for torch 2.13's CPU build, in both forms
    "cpu torch 2.13": (CPU213, [
        "torch213-cxx11-cpu-x86_64-linux", "torch-2.13-cxx11-cpu-cpython-3.9-abi3-x86_64-linux",
        "torch-stable-abi210-cpu-x86_64-linux", "torch-stable-abi-2.10-cpu-cpython-3.9-abi3-x86_64-linux",
        "torch-stable-abi214-cpu-x86_64-linux", "torch213-cxx11-cu130-x86_64-linux", "torch-cpu", "torch-cuda",
        "torch-universal", "torch212-cxx11-cpu-x86_64-linux", "torch-2.13-cpu-cpython-3.12-abi3-x86_64-linux",
        "torch-2.13-cpu-cpython-3.11-abi3-x86_64-linux", "torch213-cpu-x86_64-linux",
    ]),
    "python 3.9": (replace(CPU213, python=(3, 9)), [
        "torch-2.13-cpu-cpython-3.10-abi3-x86_64-linux", "torch-2.13-cpu-cpython-3.9-abi3-x86_64-linux",
        "torch213-cxx11-cpu-x86_64-linux", "torch-cpu",
    ]),
    # abi3 never on a free-threaded Python; abi3t from 3.15 on, after abi3 where both load
    "free-threaded 3.15": (replace(CPU213, python=(3, 15), free_threaded=True), [
        "torch-2.13-cpu-cpython-3.9-abi3-x86_64-linux", "torch-2.13-cpu-cpython-3.15-abi3t-x86_64-linux",
        "torch-stable-abi-2.10-cpu-cpython-3.15-abi3t-x86_64-linux", "torch213-cxx11-cpu-x86_64-linux",
        "torch-stable-abi210-cpu-x86_64-linux", "torch-cpu", "torch-universal",
    ]),
    "gil 3.15": (replace(CPU213, python=(3, 15)), [
        "torch-2.13-cpu-cpython-3.9-abi3-x86_64-linux", "torch-2.13-cpu-cpython-3.15-abi3t-x86_64-linux",
        "torch-2.13-cpu-cpython-3.15-abi3-x86_64-linux", "torch-stable-abi-2.10-cpu-cpython-3.15-abi3t-x86_64-linux",
    ]),
    "rocm 7.14": (SystemInfo((2, 11), "rocm", (7, 14), "x86_64", "linux", python=(3, 11)), [
        "torch211-cxx11-rocm714-x86_64-linux", "torch211-cxx11-rocm72-x86_64-linux", "torch211-cxx11-rocm63-x86_64-linux",
        "torch-2.11-rocm-7.15-cpython-3.9-abi3-x86_64-linux", "torch-2.11-rocm-7.3-cpython-3.9-abi3-x86_64-linux",
        "torch-rocm", "torch-cuda",
    ]),
    "xpu 2025.1": (SystemInfo((2, 11), "xpu", (2025, 1), "x86_64", "linux", python=(3, 11)), [
        "torch211-cxx11-xpu20251-x86_64-linux", "torch211-cxx11-xpu20250-x86_64-linux",
        "torch-2.11-xpu-2025.1-cpython-3.9-abi3-x86_64-linux", "torch-xpu", "torch-universal",
    ]),
    "cann 8.3": (SystemInfo((2, 11), "cann", (8, 3), "aarch64", "linux", python=(3, 11)), [
        "torch211-cxx11-cann83-aarch64-linux", "torch211-cxx11-cann82-aarch64-linux", "torch-cann", "torch-npu",
        "torch-universal",
    ]),
    "metal, macOS 26": (SystemInfo((2, 11), "metal", None, "aarch64", "darwin", python=(3, 11), macos=(26, 1)), [
        "torch211-metal-aarch64-darwin", "torch-2.11-metal-cpython-3.9-abi3-aarch64-darwin",
        "torch-stable-abi210-metal-aarch64-darwin", "torch211-cxx11-metal-aarch64-darwin", "torch-metal", "mlx-metal",
        "torch-universal",
    ]),
    "metal, macOS 15, mlx": (SystemInfo((2, 11), "metal", None, "aarch64", "darwin", python=(3, 11), macos=(15, 6),
                                        mlx=True), [
        "torch211-metal-aarch64-darwin", "torch-stable-abi210-metal-aarch64-darwin", "torch-metal", "mlx-metal",
    ]),
    "windows": (SystemInfo((2, 11), "cuda", (13, 0), "x86_64", "windows", python=(3, 11)), [
        "torch-stable-abi210-cu130-x86_64-windows", "torch-2.11-cuda-13.0-cpython-3.9-abi3-x86_64-windows",
        "torch211-cu130-x86_64-windows", "torch211-cxx11-cu130-x86_64-linux", "torch-cuda",
    ]),
}


def as_json(system: SystemInfo) -> dict:
    return {k: v for k, v in asdict(system).items()
            if k in ("backend", "compute_version", "cpu", "os", "torch", "cxx11", "tvm_ffi", "macos", "python",
                     "free_threaded", "mlx")}


@pytest.fixture(scope="module")
def kbuild_traces() -> dict:
    return {case: resolve(names, system) for case, (system, names) in CASES.items()}


@pytest.fixture(scope="module")
def hf_results(kbuild_traces) -> dict:
    try:
        python = hf_envs.ensure("kernels-0.19")
    except hf_envs.EnvError as e:
        pytest.fail(str(e))
    cases = [{"names": [c.name for c in kbuild_traces[case]], "system": as_json(system)}
             for case, (system, _) in CASES.items()]
    done = subprocess.run([str(python), str(HELPER)], input=json.dumps(cases), capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["kernels"] == "0.19.1"
    return dict(zip(CASES, out["cases"], strict=True))


@pytest.mark.parametrize("case", list(CASES))
def test_kbuild_and_kernels_0_19_choose_alike(case, kbuild_traces, hf_results):
    trace, hf = kbuild_traces[case], hf_results[case]
    accepted = [c.name for c in trace if c.accepted]
    assert accepted, f"{case}: the table must give each case a variant that fits"
    assert accepted == hf["accepted"], (case, hf["rejected"])
    # what kernels rejects or cannot parse, kbuild rejects (the reasons are each loader's own words)
    assert {c.name for c in trace if not c.accepted} == set(hf["rejected"]) | set(hf["invalid"])


def test_the_table_reaches_every_rule(hf_results):
    """The cases are not all easy: kernels rejects names for each of its reasons somewhere."""
    reasons = " ".join(r for hf in hf_results.values() for r in hf["rejected"].values())
    for phrase in ("Python 3.12 or later", "abi3 is not supported on free-threaded", "CUDA version", "ROCm version",
                   "stable ABI version", "tvm-ffi version", "CXX11 ABI", "CPU (aarch64)", "OS (linux)", "MLX is not",
                   "macOS 26.0", "backend (rocm)"):
        assert phrase in reasons, phrase
