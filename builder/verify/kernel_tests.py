"""`kbuild test`: run a kernel's own tests/ against each of its built variants.

The variant folder is put on the path under the kernel's Python name (a symlink in a temporary
folder), so tests written for kernel-builder (`import activation`) run unchanged; tests that load
their kernel through Hugging Face's loader (`kernels.get_kernel("<repo-id>", version=1)`) get it too,
through LOCAL_KERNELS. pytest sees only the kernel's own configuration, never a parent folder's.
"""

from __future__ import annotations

import json
import re
import tempfile
import time
from pathlib import Path

from builder import resources
from builder._toml import tomllib
from builder.config.environment import BuilderSettings
from builder.layout import BUILD_DIR
from builder.project.manifest import load_manifest
from builder.project.workspace import kernel_dirs
from builder.report import VariantResult
from builder.verify import hf_kernels, layer_check
from builder.verify.variant_choice import (
    Choice,
    built_variants,
    check_named,
    choose,
    gpu_visible,
    import_variant_from,
    place,
    probe_once,
)
from kbuild.variants import SystemInfo
from kbuild_common import proc
from kbuild_common.errors import UsageError

_NO_TESTS_COLLECTED = 5
# Statuses of kbuild test's rows beside passed, failed and skipped: a suite that stopped before
# any case ran (collection or its conftest.py failed), a variant the loader would not pick here,
# a kernel without tests/.
COULD_NOT_COLLECT, LEFT_OUT, NO_TESTS = "could not collect", "left out", "no tests"
_SKIP_PLUGIN = "kbuild_skip_reasons"  # builder/templates/kbuild_skip_reasons.py
_VARIANT_PLUGIN = "kbuild_variant_under_test"  # builder/templates/kbuild_variant_under_test.py
TIMEOUT_S = 3600  # one variant's suite, unless `kbuild test --timeout` says otherwise


def test_kernels(folder: Path, variants: tuple[str, ...], python: str, pytest_args: tuple[str, ...], reporter,
                 settings: BuilderSettings, timeout: int | None = None) -> list[VariantResult]:
    """Each kernel's tests/ against each built variant that can run here (variant_choice.py:
    what the loader would pick, a CPU variant with the GPUs hidden) or, with `variants`, against
    those; `settings`: the command's (the caller's PYTHONPATH and hub variables the suites
    keep); `timeout`: seconds per variant's suite (default TIMEOUT_S)."""
    results = []
    target = None
    kernels = kernel_dirs(folder)
    check_named(folder, kernels, variants)
    for kernel in kernels:
        manifest = load_manifest(kernel)
        if not (kernel / "tests").is_dir():
            # not the command's failure: some published kernels ship no tests (fla)
            results.append(VariantResult(manifest.name, "-", NO_TESTS,
                                         reason=f"no tests/ folder in {kernel}: nothing to test"))
            continue
        built = built_variants(kernel / BUILD_DIR, variants)
        missing = f"no built variant{' named ' + ', '.join(variants) if variants else ''} in {kernel / BUILD_DIR}"
        if not built and len(kernels) == 1:
            raise UsageError(f"{kernel}: {missing}", hint=f"run kbuild build {kernel} first")
        if not built:  # in a workspace, the kernels that have them are still tested
            results.append(VariantResult(manifest.name, "-", "skipped", reason=missing))
            continue
        if target is None:
            target = probe_once(python, reporter, "suites")
        maps = layer_check.suite_maps(manifest, python)  # the layers to check against transformers after the suite
        for choice in choose(kernel / BUILD_DIR, built, target, named=bool(variants)):
            if choice.left_out:
                results.append(VariantResult(manifest.name, choice.variant.name, LEFT_OUT, reason=choice.left_out))
                continue
            result = _run_one(manifest, choice, python, target.system, pytest_args, reporter, settings, timeout)
            if maps:
                placed = place(choice.variant.name, choice.hide_gpus, gpu_visible(target.system), "checks")
                result = layer_check.after_suite(result, manifest, choice.variant, placed, python, maps, settings,
                                                 reporter)
            results.append(result)
    return results


def _run_one(manifest, choice: Choice, python: str, system: SystemInfo, pytest_args, reporter,
             settings: BuilderSettings, timeout: int | None = None) -> VariantResult:
    timeout = timeout or TIMEOUT_S
    variant_dir = choice.variant
    placed = place(variant_dir.name, choice.hide_gpus, gpu_visible(system), "suite")
    env = {**placed.env, "KBUILD_TEST_DEVICE": placed.device}
    if choice.hide_gpus:  # the suite's own GPU asks then skip, saying so (templates/kbuild_variant_under_test.py)
        env["KBUILD_TEST_GPU_HIDDEN"] = "1"
    where = f"{placed.where} (tests that need one skip)" if placed.gpu_missing else placed.where
    reporter.info(f"testing {manifest.name}/{variant_dir.name} {where}{choice.as_asked}")
    log = manifest.root / ".kbuild" / variant_dir.name / "test.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    env.update(_hub_env(manifest.hub_repo_id, variant_dir, settings))
    root = manifest.root.resolve()
    with tempfile.TemporaryDirectory(prefix="kbuild-test-") as tmp:
        env.update(import_variant_from(Path(tmp), manifest.python_name, variant_dir, settings.pythonpath))
        config = _own_pytest_config(root)
        if config is None:  # an empty one, so pytest stops looking for one in parent folders
            config = Path(tmp) / "pytest.ini"
            config.write_text("[pytest]\n")
        # Config, rootdir and conftest.py files all come from the kernel: a parent folder's
        # pytest.ini (addopts, plugins) or conftest.py would otherwise apply to its tests.
        isolate = ["-c", str(config), f"--rootdir={root}", f"--confcutdir={root}"]
        # why tests were skipped (a CUDA suite on a CPU machine), from kbuild's plugin beside the kernel;
        # the other finds the kernel's package in the variant before any source folder can stand in
        # and the third notes a `kernels` the suite imported that is not Hugging Face's (hf_kernels.py)
        plugins = (_SKIP_PLUGIN, _VARIANT_PLUGIN, hf_kernels.PLUGIN)
        for plugin in plugins:
            (Path(tmp) / f"{plugin}.py").write_bytes(resources.read_bytes(f"templates/{plugin}.py"))
        env["KBUILD_SKIP_REASONS"] = str(Path(tmp) / "skipped.jsonl")
        env[hf_kernels.FOUND_ENV] = str(Path(tmp) / "kernels_found.json")
        env.update(KBUILD_TEST_PACKAGE=manifest.python_name, KBUILD_TEST_PACKAGE_DIR=tmp)
        cmd = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", *(a for p in plugins for a in ("-p", p)),
               *isolate, str(root / "tests"), *pytest_args]
        # straight into the log: a suite that is cut short keeps what it ran (tail it while it runs)
        with reporter.phase(f"pytest {manifest.name}/{variant_dir.name} (log {log})"):
            code = proc.run_logged(cmd, log, cwd=root, env=env, timeout=timeout)
        skips = skip_reasons(Path(env["KBUILD_SKIP_REASONS"]))
        other_kernels = hf_kernels.found(Path(env[hf_kernels.FOUND_ENV]))
    seconds = time.monotonic() - start
    output = log.read_text(errors="replace")
    if code != 0 and "LOCAL_KERNELS" in env:  # the suite may load the variant through Hugging Face's loader
        if why := hf_kernels.line(output, other_kernels, python):
            skips = (why, *skips)
    if code is None:
        with log.open("a") as f:
            f.write(f"\nkbuild: pytest stopped after {timeout} s\n")
        return VariantResult(manifest.name, variant_dir.name, "failed", seconds, log=log,
                             reason=f"timed out after {timeout} s ({_progress(output)})")
    last = _outcome_line(output, root)
    if not_collected(code, output):
        # the suite's own fault (an import its modules or conftest.py need): no case of it ran
        return VariantResult(manifest.name, variant_dir.name, COULD_NOT_COLLECT, seconds, log=log, reason=last,
                             details=skips)
    if code in (0, _NO_TESTS_COLLECTED):
        # Exit 5: every test module skipped itself (e.g. no GPU for a CUDA variant).
        status = "skipped" if " passed" not in last else "passed"
        return VariantResult(manifest.name, variant_dir.name, status, seconds, log=log, reason=last, details=skips)
    return VariantResult(manifest.name, variant_dir.name, "failed", seconds, log=log, reason=last, details=skips)


def _hub_env(repo_id: str | None, variant_dir: Path, settings: BuilderSettings) -> dict[str, str]:
    """Environment that makes Hugging Face's loader load `repo_id` from the variant under test
    (LOCAL_KERNELS may name a variant folder); nothing without a [general.hub] repo-id."""
    if not repo_id:
        return {}
    # The caller's overrides for other repos stay; ours wins for this one.
    others = [e for e in (settings.local_kernels or "").split(":") if e and e.split("=", 1)[0] != repo_id]
    env = {"LOCAL_KERNELS": ":".join([*others, f"{repo_id}={variant_dir.resolve()}"])}
    # A local override needs no network (kernels 0.17.2 makes no request), and offline, whatever
    # else the tests fetch fails at once instead of waiting on an unreachable Hub. An explicit
    # HF_HUB_OFFLINE from the caller stands.
    if settings.hf_hub_offline is None:
        env["HF_HUB_OFFLINE"] = "1"
    return env


def _own_pytest_config(root: Path) -> Path | None:
    """The kernel's own pytest config file, found as pytest finds one (its names, its order), but
    only in the kernel root."""
    for name in ("pytest.toml", ".pytest.toml", "pytest.ini", ".pytest.ini"):  # these always count
        if (root / name).is_file():
            return root / name
    pyproject = root / "pyproject.toml"
    if pyproject.is_file():
        try:
            if "pytest" in tomllib.loads(pyproject.read_text()).get("tool", {}):
                return pyproject
        except tomllib.TOMLDecodeError:
            return pyproject  # pytest reports the error in the test log
    for name, section in (("tox.ini", "pytest"), ("setup.cfg", "tool:pytest")):
        path = root / name
        if path.is_file() and re.search(rf"^\[{re.escape(section)}\]", path.read_text(), re.M):
            return path
    return None


def _progress(output: str) -> str:
    """What a cut-short `pytest -q` got through, from its progress dots."""
    marks = "".join(m[1] for m in re.finditer(r"^([.FEsxX]+)\s*(?:\[\s*\d+%\])?\s*$", output, re.M))
    return f"{marks.count('.')} passed, {marks.count('F') + marks.count('E')} failed, {marks.count('s')} skipped so far"


def not_collected(code: int, output: str) -> bool:
    """Whether pytest (exit `code`, printed `output`) stopped before running any case because the
    suite could not be collected: a test module that fails to import (exit 2, "Interrupted: N
    errors during collection"), or a conftest.py that does (exit 4)."""
    if code == 2:
        return re.search(r"^!+ Interrupted: \d+ errors? during collection !+$", output, re.M) is not None
    return code == 4 and _CONFTEST_ERROR.search(output) is not None


_CONFTEST_ERROR = re.compile(r"^ImportError while loading conftest '([^']+)'\.$", re.M)


def _collection_error(output: str) -> str:
    """`; error collecting (importing) tests/test_x.py: E   ImportError: ...`, or ""."""
    m = re.search(r"^_+ ERROR collecting (\S+) _+$", output, re.M)
    if not m:
        return ""
    first = re.search(r"^E\s+(.+)$", output[m.end():], re.M)
    return f"; error collecting (importing) {m[1]}" + (f": {first[1].strip()}" if first else "")


SKIP_LINES = 10  # the rest are in the log


def skip_reasons(jsonl: Path) -> tuple[str, ...]:
    """What kbuild's pytest plugin wrote, as `skipped 2: tests/test_x.py:11: no CUDA device`
    lines, the most frequent first (none when the suite skipped nothing or never got that far)."""
    try:
        found = [json.loads(line) for line in jsonl.read_text(encoding="utf-8").splitlines() if line.strip()]
    except (OSError, ValueError):
        return ()
    found.sort(key=lambda s: (-s["count"], s["where"]))
    lines = [f"skipped {s['count']}: {s['where']}: {s['reason']}" for s in found[:SKIP_LINES]]
    if len(found) > SKIP_LINES:
        lines.append(f"and {len(found) - SKIP_LINES} more skip reason(s)")
    return tuple(lines)


def _outcome_line(output: str, root: Path | None = None) -> str:
    """pytest's closing summary (with the first collection error, which the summary counts only as
    "1 error"), or what killed it (a crash leaves no summary)."""
    lines = output.strip().splitlines()
    if m := _CONFTEST_ERROR.search(output):  # pytest prints no summary then
        first = re.search(r"^E\s+(.+)$", output[m.end():], re.M)
        path = Path(m[1])
        shown = path.relative_to(root) if root and path.is_relative_to(root) else path
        return f"error loading {shown}" + (f": {first[1].strip()}" if first else "")
    for line in reversed(lines):
        if re.search(r"\d+ (passed|failed|skipped|error)|no tests ran", line):
            return line.strip("= ") + _collection_error(output)
    crash = next((line for line in lines if "Fatal Python error: " in line), None)
    if crash:
        where = next((line.strip() for line in lines if "/tests/" in line and ", line " in line), "")
        reason = crash.split("Fatal Python error: ", 1)[1]
        return f"pytest crashed: {reason}" + (f" at {where}" if where else "")
    return lines[-1] if lines else "no output"
