"""`kbuild test`: run a kernel's own tests/ against each of its built variants.

The variant folder is put on the path under the kernel's Python name (a symlink in a temporary
folder), so tests written for kernel-builder (`import activation`) run unchanged.
"""

from __future__ import annotations

import re
import tempfile
import time
from pathlib import Path

from kbuild.variants import parse_variant

from . import proc
from .build import BUILD_DIR
from .errors import UsageError
from .manifest import load_manifest
from .report import VariantResult
from .workspace import kernel_dirs

_NO_TESTS_COLLECTED = 5
_GPU_PROBE = "import torch; print(int(torch.cuda.is_available()))"


def test_kernels(folder: Path, variants: tuple[str, ...], python: str, pytest_args: tuple[str, ...], reporter) -> list[VariantResult]:
    results = []
    has_gpu = None
    for kernel in kernel_dirs(folder):
        manifest = load_manifest(kernel)
        built = _built_variants(kernel / BUILD_DIR, variants)
        if not built:
            raise UsageError(f"{kernel}: no built variant{' named ' + ', '.join(variants) if variants else ''} in "
                             f"{kernel / BUILD_DIR}", hint=f"run kbuild build {kernel} first")
        if not (kernel / "tests").is_dir():
            raise UsageError(f"{kernel}: no tests/ folder to run")
        for variant in built:
            if has_gpu is None:
                has_gpu = proc.run([python, "-c", _GPU_PROBE], timeout=300, what="GPU probe").stdout.strip().endswith("1")
            results.append(_run_one(manifest, variant, python, has_gpu, pytest_args, reporter))
    return results


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
