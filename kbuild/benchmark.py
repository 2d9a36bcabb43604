"""The base class of a kernel's benchmarks (`benchmarks/benchmark*.py`), in the convention of
Hugging Face's `kernels.benchmark.Benchmark`, so one file runs under `kbuild bench` and under
`kernels benchmark` alike. A kernel imports Hugging Face's when it is installed and this one
otherwise (kbuild's template does); `kbuild bench` accepts subclasses of either.

A subclass defines workloads by name: `benchmark_<w>()` calls the kernel (on `self.kernel`, the
loaded variant; tensors on `self.device`) and leaves its result in `self.out`; `setup_<w>()` (else
`setup()`) makes the inputs; `verify_<w>()` returns the reference result, which is both checked
against `self.out` and timed beside the kernel. `seed`, when set, seeds torch and random first.
"""

from __future__ import annotations

from typing import Any


class Benchmark:
    seed: int | None = None
    device: str = "cpu"  # set by the runner: the variant's device

    def __init__(self) -> None:
        self.kernel: Any = None
        self.out: Any = None

    def setup(self) -> None:
        """Inputs shared by workloads without a setup_<w> of their own."""
