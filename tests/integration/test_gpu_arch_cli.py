"""`kbuild gpu-arch` (KBUILD_GPU_ARCH) stands in for the device probe, in a real process."""

from __future__ import annotations

import subprocess
import sys


def run_python(code: str, **env: str) -> subprocess.CompletedProcess:
    import os

    environ = {k: v for k, v in os.environ.items() if k != "KBUILD_GPU_ARCH"} | env
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environ, timeout=300)


def test_kbuild_gpu_arch_stands_in_for_the_probe():
    # a fresh process: detect_system with the real torch, the variable naming the device
    code = "from kbuild.variants import detect_system; s = detect_system(); print(s.gpu_arch, s.device_visible)"
    done = run_python(code, KBUILD_GPU_ARCH="8.6")
    assert done.returncode == 0, done.stderr
    import torch

    if torch.version.cuda:
        assert done.stdout.split() == ["8.6", "True"]  # a GPU of that arch is taken to be there
        bad = run_python(code, KBUILD_GPU_ARCH="sm_86")
        assert bad.returncode != 0 and "KBUILD_GPU_ARCH: expected a CUDA compute capability" in bad.stderr
    else:  # a CPU torch has no GPU backend to judge for
        assert done.stdout.split() == ["None", "True"]
