"""A first-party stable-ABI kernel compiles against the headers of the oldest torch its variant
names: `torch-stable-abi210-…` promises torch >= 2.10, so someone building it with torch 2.10 or
2.11 (the H200's torch) must not meet helpers that only newer headers have. Run 7 on the H200 found
activation using two (STABLE_TORCH_ERROR_CODE_CHECK, HeaderOnlyArrayRef's operator==).

The torch X.Y.0 wheel comes from PyPI (about 0.9 GB, downloaded once into the kbuild cache; only
torch/include is kept). Each stable variant's units are planned by kbuild as a build would plan them,
then compiled with the torch include folders swapped for the old release's: C++ units with
-fsyntax-only, CUDA units preprocessed by nvcc for one arch."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from filelock import FileLock

pytest.importorskip("torch")

from builder.backends.cuda_arch import parse_arch_list
from builder.compile.graph import write_graph
from builder.config.cascade import Setting
from builder.config.options import BuildOptions
from builder.plan.planner import plan_kernels
from builder.project.manifest import load_manifest
from builder.report import Reporter

REPO = Path(__file__).resolve().parents[2]
CUDA_HOME = os.environ.get("CUDA_HOME", "/usr/local/cuda")
def _stable(kernel: Path) -> bool:
    torch_section = load_manifest(kernel).torch if (kernel / "build.toml").is_file() else None
    return bool(torch_section and torch_section.stable_abi)


STABLE_KERNELS = sorted(d.name for d in (REPO / "kernels").iterdir() if _stable(d))


def torch_headers(release: str) -> Path:
    """torch/include of torch `release` (X.Y.0), from PyPI's wheel, kept in the kbuild cache."""
    cache = Path(os.environ.get("KBUILD_CACHE") or Path.home() / ".cache" / "kbuild") / "test-torch-headers"
    dest = cache / release
    cache.mkdir(parents=True, exist_ok=True)
    with FileLock(str(cache / f"{release}.lock")):
        if (dest / "torch" / "include" / "torch").is_dir():
            return dest / "torch" / "include"
        wheels = cache / f"{release}.wheels"
        done = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                               f"torch=={release}", "-d", str(wheels)], capture_output=True, text=True, timeout=1800)
        if done.returncode != 0:
            pytest.skip(f"torch {release} is not downloadable here: {done.stderr[-300:]}")
        wheel = next(wheels.glob("torch-*.whl"))
        part = cache / f"{release}.part"
        with zipfile.ZipFile(wheel) as z:
            z.extractall(part, [n for n in z.namelist() if n.startswith("torch/include/")])
        part.rename(dest)
        wheel.unlink()
    return dest / "torch" / "include"


def swap_torch_includes(flags: tuple[str, ...], include: Path) -> list[str] | None:
    """The unit's flags with this venv's torch include folders replaced by `include`'s; None for a
    unit that does not see torch's headers (a kernel's own .cu, say)."""
    import torch

    ours = Path(torch.__file__).parent / "include"
    swapped = [f"-I{include}{f[2 + len(str(ours)):]}" if f.startswith(f"-I{ours}") else f for f in flags]
    return swapped if swapped != list(flags) else None


@pytest.mark.parametrize("name", STABLE_KERNELS)
def test_stable_variants_compile_against_their_oldest_torch(name, tmp_path):
    # a copy: planning writes the generated include folder (registration.h) beside the kernel
    kernel = tmp_path / name
    shutil.copytree(REPO / "kernels" / name, kernel, ignore=shutil.ignore_patterns("build", ".kbuild", "__pycache__"))
    options = BuildOptions(folder=kernel, python=sys.executable, cuda_home=CUDA_HOME, cuda_archs=Setting(parse_arch_list("8.0", "--cuda-archs"), "--cuda-archs"),
                           compile_cache=False)
    jobs, failed = plan_kernels(options, Reporter(plain=True), {})
    assert failed == []
    variants = [v for j in jobs for v in j.plan.variants if v.name.startswith("torch-stable-abi")]
    assert variants, f"{name}: no stable-ABI variant planned here"
    write_graph(options, jobs, None)  # the generated include folder, as a build writes it
    errors = []
    for variant in variants:
        abi = variant.name.split("-")[2].removeprefix("abi")  # "210" -> 2.10
        release = f"{abi[0]}.{abi[1:]}.0"
        include = torch_headers(release)
        checked = 0
        for unit in variant.units:
            flags = swap_torch_includes(unit.flags, include)
            if flags is None:
                continue
            checked += 1
            if unit.tool == "nvcc":
                cmd = [unit.compiler, *flags, "-E", str(unit.source), "-o", os.devnull]
            else:
                cmd = [options.cxx, *flags, "-fsyntax-only", str(unit.source)]
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
            if done.returncode:
                first = [line for line in done.stderr.splitlines() if "error" in line][:3]
                errors.append(f"{variant.name} {unit.source.name} against torch {release}: " + " | ".join(first))
        assert checked, f"{variant.name}: no unit sees torch's headers"
    assert not errors, "\n".join(errors)
