"""`kbuild bench`: a kernel's benchmarks/ run against each of its built variants that can run
here, chosen as `kbuild test` chooses them (variant_choice.py: what the loader would pick, a CPU
variant with the GPUs hidden, --variant for any), each workload timed beside its reference in the
same process (the runner: builder/templates/kbuild_bench_runner.py, in the Python that loads the
variant).

The variant is put on the path under the kernel's Python name, as for `kbuild test`, so files
written for Hugging Face's `kernels benchmark` (`from kernels.benchmark import Benchmark`, the
kernel as `self.kernel`) run unchanged.
"""

from __future__ import annotations

import json
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from builder import resources
from builder.config.environment import BuilderSettings
from builder.hub.address import parse_hub
from builder.hub.open import open_hub
from builder.layout import BUILD_DIR
from builder.project.manifest import load_manifest
from builder.project.workspace import kernel_dirs
from builder.verify.variant_choice import (
    built_variants,
    check_named,
    choose,
    gpu_visible,
    import_variant_from,
    place,
    probe_once,
)
from kbuild.choice import format_trace
from kbuild.errors import KernelError
from kbuild.hub_loader import install_kernel, resolve_kernel
from kbuild.hubs import parse_hub_address
from kbuild.metadata import VariantMetadata
from kbuild.refs import parse_request
from kbuild.repo_layout import variant_folder
from kbuild.settings import from_environment
from kbuild.trust import check_trust
from kbuild_common import proc
from kbuild_common.errors import UsageError

_RUNNER = "kbuild_bench_runner"  # builder/templates/kbuild_bench_runner.py
TIMEOUT_S = 3600  # one variant's benchmarks


@dataclass(frozen=True)
class Timing:
    min_ms: float
    median_ms: float
    max_ms: float


@dataclass(frozen=True)
class Workload:
    kernel: str
    variant: str
    script: str
    cls: str
    name: str
    device: str
    timing: Timing | None = None  # the kernel's
    reference: Timing | None = None  # verify_<w>'s, timed the same way in the same process
    verified: bool | None = None  # None: the workload has no verify_<w>
    error: str = ""
    max_abs_diff: float | None = None  # how far off the kernel was, when it differs

    @property
    def speedup(self) -> float | None:
        """The reference's median over the kernel's (above 1: the kernel is faster)."""
        if self.timing is None or self.reference is None or self.timing.median_ms <= 0:
            return None
        return self.reference.median_ms / self.timing.median_ms

    @property
    def ok(self) -> bool:
        return not self.error and self.verified is not False


@dataclass
class BenchRun:
    """Every workload of every variant run, with what was skipped or left out and why."""

    workloads: list[Workload] = field(default_factory=list)
    skipped: list[tuple[str, str, str]] = field(default_factory=list)  # kernel, variant, why
    # kernel, variant, why: the variants the loader would not pick here (variant_choice.choose)
    left_out: list[tuple[str, str, str]] = field(default_factory=list)
    machines: dict[str, dict] = field(default_factory=dict)  # variant -> what the runner saw
    roots: dict[str, Path] = field(default_factory=dict)  # kernel -> its folder

    def of(self, kernel: str) -> BenchRun:
        """The part of the run that is `kernel`'s."""
        return BenchRun([w for w in self.workloads if w.kernel == kernel], [s for s in self.skipped if s[0] == kernel],
                        [s for s in self.left_out if s[0] == kernel],
                        {k: v for k, v in self.machines.items() if k.split('/')[0] == kernel},
                        {kernel: self.roots[kernel]})

    def to_json(self) -> dict:
        rows = []
        for w in self.workloads:
            row = asdict(w)
            row["class"] = row.pop("cls")
            row["speedup"] = w.speedup
            rows.append(row)
        def why(found):
            return [{"kernel": k, "variant": v, "reason": r} for k, v, r in found]
        return {"workloads": rows, "machines": self.machines, "skipped": why(self.skipped),
                "left_out": why(self.left_out)}


def bench_kernels(folder: Path, variants: tuple[str, ...], python: str, reporter, settings: BuilderSettings,
                  warmup: int = 5, repeats: int = 20, timeout: int | None = None) -> BenchRun:
    """Run each kernel's benchmarks/benchmark*.py against each built variant that can run here
    (variant_choice.py: what the loader would pick, a CPU variant with the GPUs hidden) or, with
    `variants`, against those."""
    run = BenchRun()
    target = None
    kernels = kernel_dirs(folder)
    check_named(folder, kernels, variants)
    for kernel in kernels:
        manifest = load_manifest(kernel)
        run.roots[manifest.name] = kernel
        built = built_variants(kernel / BUILD_DIR, variants)
        scripts = sorted((kernel / "benchmarks").glob("benchmark*.py"))
        lone = len(kernels) == 1
        if not built:
            missing = f"no built variant{' named ' + ', '.join(variants) if variants else ''} in {kernel / BUILD_DIR}"
            if lone:
                raise UsageError(f"{kernel}: {missing}", hint=f"run kbuild build {kernel} first")
            run.skipped.append((manifest.name, "-", missing))
            continue
        if not scripts:
            why = f"no benchmarks/benchmark*.py in {kernel}"
            if lone:
                raise UsageError(f"{kernel}: {why}", hint="kbuild init writes one; see kbuild/benchmark.py")
            run.skipped.append((manifest.name, "-", why))
            continue
        if target is None:
            target = probe_once(python, reporter, "benchmarks")
        for choice in choose(kernel / BUILD_DIR, built, target, named=bool(variants), does="benchmarks"):
            variant_dir = choice.variant
            if choice.left_out:
                run.left_out.append((manifest.name, variant_dir.name, choice.left_out))
                continue
            placed = place(variant_dir.name, choice.hide_gpus, gpu_visible(target.system), "benchmarks")
            if placed.gpu_missing:
                run.skipped.append((manifest.name, variant_dir.name, "a CUDA variant and no CUDA device here"))
                continue
            reporter.info(f"benchmarking {manifest.name}/{variant_dir.name} {placed.where}{choice.as_asked}")
            with reporter.phase(f"benchmarking {manifest.name}/{variant_dir.name}"):
                doc = _run_variant(manifest.python_name, manifest.root, variant_dir, scripts, python, placed.device,
                                   placed.env, settings.pythonpath, warmup, repeats, timeout or TIMEOUT_S)
            run.machines[f"{manifest.name}/{variant_dir.name}"] = {k: v for k, v in doc.items() if k != "scripts"}
            run.workloads.extend(_workloads(manifest.name, variant_dir.name, placed.device, doc))
    return run


def bench_published(request: str, hub: str | None, token: str | None, reporter, work: Path,
                    trust_remote_code: bool = False, warmup: int = 5, repeats: int = 20,
                    timeout: int | None = None) -> BenchRun:
    """`kbuild bench ORG/NAME@REV`: the variant of that pin that get_kernel would load here,
    downloaded and verified by kbuild's loader, against the benchmarks/ published beside it, in
    this Python. Running them runs the repo's code: the loader's trust rule applies."""
    try:
        ref = parse_request(request)
        check_trust(ref.repo_id, parse_hub_address(hub).endpoint, trust_remote_code, from_environment())
        with reporter.phase(f"resolving {request}"):
            found = resolve_kernel(request, hub=hub)
        if found.chosen is None:
            raise UsageError(f"{request}: no variant at {found.commit[:12]} loads here\n"
                             f"{format_trace(list(found.trace))}")
        where = f"{ref.repo_id}@{found.commit[:12]} {variant_folder(found.chosen)}"
        with reporter.phase(f"fetching {where}"):
            folder = install_kernel(ref.repo_id, revision=found.commit, hub=hub, variant=found.chosen)
    except KernelError as e:  # the loader's own one-line errors (no such repo, revision, trust, digest)
        raise UsageError(str(e)) from None
    name = ref.repo_id.split("/")[1]
    root = work / name
    backend = open_hub(parse_hub(hub), token)
    scripts = []
    for path in sorted(backend.files(ref.repo_id, found.commit, "benchmarks")):
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(backend.read(ref.repo_id, found.commit, path))
        if target.parent == root / "benchmarks" and target.name.startswith("benchmark") and target.suffix == ".py":
            scripts.append(target)
    if not scripts:
        raise UsageError(f"{ref.repo_id}@{found.commit[:12]}: no benchmarks/benchmark*.py was published")
    python_name = VariantMetadata.for_variant(folder).python_name or name.replace("-", "_")
    # the loader's own choice for this system: a CPU variant only when torch sees no GPU (none to hide),
    # a compiled GPU one only when it sees one
    placed = place(found.chosen, False, gpu_visible(found.system), "benchmarks")
    if placed.gpu_missing:  # the loader falls back to a GPU build when the repo has no CPU one
        raise UsageError(f"{request}: the variant that loads here, {found.chosen}, is built for a GPU, and torch "
                         "sees none: its benchmarks have nothing to run on")
    run = BenchRun()  # no kernel folder of the user's to keep results in: --json and --plot say where
    with reporter.phase(f"benchmarking {ref.repo_id}@{found.commit[:12]} {found.chosen} {placed.where}"):
        doc = _run_variant(python_name, root, folder, scripts, sys.executable, placed.device, placed.env, None,
                           warmup, repeats, timeout or TIMEOUT_S)
    run.machines[f"{name}/{found.chosen}"] = {k: v for k, v in doc.items() if k != "scripts"}
    run.workloads.extend(_workloads(name, found.chosen, placed.device, doc))
    return run


def _run_variant(python_name: str, root: Path, variant_dir: Path, scripts: list[Path], python: str, device: str,
                 env: dict[str, str], pythonpath: str | None, warmup: int, repeats: int, timeout: int) -> dict:
    """The runner's JSON for one variant, run with `root` (the kernel's folder) as its folder and
    `env` (variant_choice.place's) in its environment."""
    log = root / ".kbuild" / variant_dir.name / "bench.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kbuild-bench-") as tmp:
        env = {**env, **import_variant_from(Path(tmp), python_name, variant_dir, pythonpath)}
        runner = Path(tmp) / f"{_RUNNER}.py"
        runner.write_bytes(resources.read_bytes(f"templates/{_RUNNER}.py"))
        out = Path(tmp) / "bench.json"
        cmd = [python, str(runner), "--kernel", python_name, "--device", device, "--warmup", str(warmup),
               "--repeats", str(repeats), "--out", str(out), *map(str, scripts)]
        code = proc.run_logged(cmd, log, cwd=root, env=env, timeout=timeout)
        if code is None:
            raise UsageError(f"{root.name}/{variant_dir.name}: benchmarks stopped after {timeout} s (log {log})")
        if code != 0 or not out.is_file():
            tail = log.read_text(errors="replace").strip().splitlines()[-1:] or ["no output"]
            return {"error": f"the benchmark runner exited {code}: {tail[0]} (log {log})", "scripts": []}
        return json.loads(out.read_text())


def _workloads(kernel: str, variant: str, device: str, doc: dict) -> list[Workload]:
    if "error" in doc:
        return [Workload(kernel, variant, "-", "-", "-", device, error=doc["error"])]
    rows = []
    for script in doc["scripts"]:
        if "error" in script:
            rows.append(Workload(kernel, variant, script["script"], "-", "-", device, error=script["error"]))
        for cls in script["classes"]:
            for w in cls["workloads"]:
                rows.append(Workload(kernel, variant, script["script"], cls["class"], w["workload"], device,
                                     timing=Timing(**w["kernel"]) if "kernel" in w else None,
                                     reference=Timing(**w["reference"]) if "reference" in w else None,
                                     verified=w.get("verified"), error=w.get("error", ""),
                                     max_abs_diff=w.get("max_abs_diff")))
    return rows
