"""`kbuild test`: run a kernel's own tests/ against each of its built variants.

The variant folder is put on the path under the kernel's Python name (a symlink in a temporary
folder), so tests written for kernel-builder (`import activation`) run unchanged.
"""

from __future__ import annotations

import re
import tempfile
import time
from pathlib import Path

from kbuild.variants import NOARCH, SystemInfo, Variant, host_cpu, host_os, parse_variant, why_not

from . import proc
from .build import BUILD_DIR
from .errors import UsageError
from .manifest import load_manifest
from .report import VariantResult
from .toolchain import TorchInfo, probe_torch
from .workspace import kernel_dirs

_NO_TESTS_COLLECTED = 5
_GPU_PROBE = "import torch; print(int(torch.cuda.is_available()))"


def test_kernels(folder: Path, variants: tuple[str, ...], python: str, pytest_args: tuple[str, ...], reporter,
                 cache_dir: Path | None = None) -> list[VariantResult]:
    results = []
    has_gpu = None
    torch = probe_torch(python, cache_dir or Path.home() / ".cache" / "kbuild" / "probes")
    kernels = kernel_dirs(folder)
    for kernel in kernels:
        manifest = load_manifest(kernel)
        built = _built_variants(kernel / BUILD_DIR, variants)
        missing = f"no built variant{' named ' + ', '.join(variants) if variants else ''} in {kernel / BUILD_DIR}"
        if not built and len(kernels) == 1:
            raise UsageError(f"{kernel}: {missing}", hint=f"run kbuild build {kernel} first")
        if not built:  # in a workspace, the kernels that have them are still tested
            results.append(VariantResult(manifest.name, "-", "skipped", reason=missing))
            continue
        if not (kernel / "tests").is_dir():
            raise UsageError(f"{kernel}: no tests/ folder to run")
        for variant in built:
            if reason := _cannot_load(parse_variant(variant.name), torch):
                # e.g. a torch 2.13 build or a cu132 build in build/ beside this torch's own
                results.append(VariantResult(manifest.name, variant.name, "skipped",
                                             reason=f"cannot load in torch {torch.torch_version}: {reason}"))
                continue
            if has_gpu is None:
                has_gpu = proc.run([python, "-c", _GPU_PROBE], timeout=300, what="GPU probe").stdout.strip().endswith("1")
            results.append(_run_one(manifest, variant, python, has_gpu, pytest_args, reporter))
    return results


def _cannot_load(variant: Variant, torch: TorchInfo) -> str | None:
    """Why the target torch cannot load `variant` (kbuild's loader rules), or None. Python-only
    variants always run: Triton kernels fall back to Triton's interpreter on CPU tensors."""
    if variant.kind == NOARCH:
        return None
    if variant.backend == "cuda" and torch.cuda is None:
        return "it is a CPU build of torch"
    compute = torch.cuda_version if variant.backend == "cuda" else None
    system = SystemInfo(torch.torch, variant.backend, compute, host_cpu(), host_os(), torch.cxx11)
    return why_not(variant, system)


def _built_variants(build_dir: Path, only: tuple[str, ...]) -> list[Path]:
    if not build_dir.is_dir():
        return []
    found = sorted(p for p in build_dir.iterdir() if p.is_dir() and not p.name.startswith(".")
                   and (p / "metadata.json").is_file())
    return [p for p in found if not only or p.name in only]


def _run_one(manifest, variant_dir: Path, python: str, has_gpu: bool, pytest_args, reporter) -> VariantResult:
    variant = parse_variant(variant_dir.name)
    device = "cuda" if variant.backend in ("cuda", "rocm") else "cpu"
    env = {"KBUILD_TEST_DEVICE": device}
    if variant.kind == "noarch" and device == "cuda" and not has_gpu:
        # Triton kernels run on CPU tensors under Triton's interpreter.
        env.update(KBUILD_TEST_DEVICE="cpu", TRITON_INTERPRET="1")
    log = manifest.root / ".kbuild" / variant_dir.name / "test.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    reporter.info(f"testing {manifest.name}/{variant_dir.name} on {env['KBUILD_TEST_DEVICE']}"
                  + (" (Triton interpreter)" if "TRITON_INTERPRET" in env else ""))
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kbuild-test-") as tmp:
        (Path(tmp) / manifest.python_name).symlink_to(variant_dir.resolve(), target_is_directory=True)
        env["PYTHONPATH"] = tmp
        cmd = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(manifest.root / "tests"), *pytest_args]
        done = proc.run(cmd, cwd=manifest.root, env=env, timeout=3600, check=False, what="pytest")
    log.write_text(done.stdout)
    seconds = time.monotonic() - start
    last = _outcome_line(done.stdout)
    if done.returncode in (0, _NO_TESTS_COLLECTED):
        # Exit 5: every test module skipped itself (e.g. no GPU for a CUDA variant).
        status = "skipped" if " passed" not in last else "passed"
        return VariantResult(manifest.name, variant_dir.name, status, seconds, log=log, reason=last)
    return VariantResult(manifest.name, variant_dir.name, "failed", seconds, log=log, reason=last)


def _outcome_line(output: str) -> str:
    """pytest's closing summary, or what killed it (a crash leaves no summary)."""
    lines = output.strip().splitlines()
    for line in reversed(lines):
        if re.search(r"\d+ (passed|failed|skipped|error)|no tests ran", line):
            return line.strip("= ")
    crash = next((line for line in lines if "Fatal Python error: " in line), None)
    if crash:
        where = next((line.strip() for line in lines if "/tests/" in line and ", line " in line), "")
        reason = crash.split("Fatal Python error: ", 1)[1]
        return f"pytest crashed: {reason}" + (f" at {where}" if where else "")
    return lines[-1] if lines else "no output"
