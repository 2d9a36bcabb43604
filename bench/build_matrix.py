"""Matrix build benchmark: `kbuild build --all` over the first-party kernels, beside a baseline.

    .venv/bin/python bench/build_matrix.py [--kernels activation rmsnorm] [--torch 2.14] [--cuda 13.0]
        [--archs 8.0] [--skip-baseline] [--skip-tu] [--jobs N] [--out FILE.json] [--keep]

Everything runs on a fresh copy of kernels/* in a temporary workspace (narrowed by --torch/--cuda
through its [workspace.matrix], by --archs through `cuda-capabilities`), in this order:
- provisioning (one-time): the torch environments and nvcc installs the matrix needs, installed
  into $KBUILD_TOOLCHAINS up front so that no figure below includes a download;
- cold: `kbuild build <ws> --all -j N` with an empty compile cache (CCACHE_DIR = a new folder).
  Target: <= 0.6x the baseline, which builds the same compiled variants one after another the
  usual way: `torch.utils.cpp_extension.load` (its own ninja, MAX_JOBS=N) run in each variant's
  torch environment with CUDA_HOME at that variant's nvcc, a fresh build_directory, the same
  sources and kbuild's flags for them (-gencode list, -O3, defines, includes incl. registration.h;
  the half/bfloat16 defines load() adds are undone with -U as kbuild drops them), and no cache
  (load() would put a ccache found on PATH in front of the compilers). Its figure is the time
  spent inside load(); the processes' wall time (Python and torch start-up) is beside it;
- no-op: the same command again. Target: < 1 s;
- touch one .cu (rmsnorm.cu): the compile steps ninja ran, from kbuild's `[n/t] NVCC … (variant)`
  lines. Expected: one per CUDA version, since the .cu has no torch header and the torch
  releases share its object;
- warm: build/ and .kbuild/ of the workspace and every kernel deleted, rebuilt from the now warm
  compile cache. Target: <= 0.15x cold;
- per TU: each first-party .cu compiled by nvcc 13.0 for sm_80 + sm_90 with torch 2.14's include
  paths and no cache, as it is and with `#include <torch/extension.h>` prepended: what keeping
  torch out of device code saves.
Prints a table and writes JSON (--out).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # builder/_toml.py's choice (bench/ imports only what builder's folders offer: test_bench_imports)
    import tomli as tomllib

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from builder import Reporter  # noqa: E402
from builder.backends import BACKENDS  # noqa: E402
from builder.compile import ninja_binary  # noqa: E402
from builder.config import PYPI, BuildOptions  # noqa: E402
from builder.plan import Target, load_table, matrix_variants, plan_kernels, select  # noqa: E402
from builder.project import kernel_dirs, load_manifest, workspace_matrix  # noqa: E402
from builder.toolchains import ToolchainStore, probe_torch  # noqa: E402

KBUILD = [sys.executable, "-m", "builder.commands.main"]
STEP = re.compile(r"^\[(\d+)/(\d+)\] (CXX|NVCC) (\S+) \((\S+)\)$", re.M)
TOOLCHAINS = Path(os.environ.get("KBUILD_TOOLCHAINS") or Path.home() / ".cache" / "kbuild" / "toolchains")
CACHE = Path(os.environ.get("KBUILD_CACHE") or Path.home() / ".cache" / "kbuild")

# Runs in each variant's torch environment: one `cpp_extension.load`, timed inside.
BASELINE = r"""
import json, sys, time
spec = json.loads(sys.argv[1])
from torch.utils.cpp_extension import load
start, error = time.perf_counter(), None
try:
    load(spec["name"], spec["sources"], extra_cflags=spec["cflags"], extra_cuda_cflags=spec["cuda_cflags"],
         extra_ldflags=spec["ldflags"], build_directory=spec["dir"], is_python_module=False)
except Exception as e:
    error = f"{type(e).__name__}: {e}"[-3000:]
print(json.dumps({"seconds": time.perf_counter() - start, "error": error}))
"""


def say(text: str) -> None:
    print(text, flush=True)


def kbuild(*args: str, env: dict | None = None) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run([*KBUILD, *args], cwd=REPO, env={**os.environ, "CI": "1", **(env or {})},
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"kbuild {' '.join(args)} failed (exit {done.returncode}):\n{done.stdout[-6000:]}")
    return seconds, done.stdout


def make_workspace(root: Path, kernels: list[str], torch: list[str], cuda: list[str], archs: list[str]) -> Path:
    ws = root / "ws"
    for name in kernels:
        shutil.copytree(REPO / "kernels" / name, ws / "kernels" / name,
                        ignore=shutil.ignore_patterns("build", ".kbuild", "__pycache__"))
        if archs:
            set_archs(ws / "kernels" / name / "build.toml", archs)
    text = '[workspace]\nmembers = ["kernels/*"]\n'
    matrix = {k: v for k, v in (("torch", torch), ("cuda", cuda)) if v}
    if matrix:
        text += "[workspace.matrix]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in matrix.items())
    (ws / "build.toml").write_text(text)
    return ws


def set_archs(manifest: Path, archs: list[str]) -> None:
    """Write `cuda-capabilities = archs` into every [kernel.*] section that compiles a .cu."""
    sections = {f"kernel.{n}" for n, s in tomllib.loads(manifest.read_text()).get("kernel", {}).items()
                if s.get("backend") == "cuda" and any(f.endswith(".cu") for f in s.get("src", []))}
    out, section = [], None
    for line in manifest.read_text().splitlines():
        if header := re.match(r"\s*\[([^\[\]]+)\]\s*(#.*)?$", line):
            section = header[1].strip()
            out.append(line)
            if section in sections:
                out.append(f"cuda-capabilities = {json.dumps(archs)}")
        elif not (section in sections and line.strip().startswith("cuda-capabilities")):
            out.append(line)
    manifest.write_text("\n".join(out) + "\n")


def matrix_targets(ws: Path) -> list[tuple[str, str, Target]]:
    """(kernel, variant, toolchain) of every compiled variant `kbuild build --all` builds in `ws`."""
    matrix = select(*workspace_matrix(ws))
    return [(m.name, mv.variant.name, mv.target) for m in map(load_manifest, kernel_dirs(ws))
            for mv in matrix_variants(m, matrix)[0] if mv.target]


def provision(targets: list[Target], store: ToolchainStore, tu: bool) -> None:
    """Every toolchain of `targets` (plus torch 2.14 + CUDA 13.0 for the per-TU figures), and
    kbuild's probe of each torch, which it caches on first use."""
    torch_table, toolkits, _ = load_table()
    extra = [Target(torch_table[(2, 14)], toolkits["cuda"][(13, 0)])] if tu else []
    wants_cuda: dict[str, bool] = {}
    for t in targets + extra:
        wants_cuda[t.torch.version] = wants_cuda.get(t.torch.version, False) or t.toolkit is not None
    for version, cuda in sorted(wants_cuda.items(), key=lambda kv: not kv[1]):  # a CUDA build serves cpu too
        python = store.torch_python(version, "cuda" if cuda else None, reuse=(sys.executable,))
        probe_torch(python, CACHE / "probes")
        say(f"  torch {version}{' (CUDA build)' if cuda else ''}: {python}")
    for release in sorted({t.toolkit for t in targets + extra if t.toolkit}, key=lambda c: c.version):
        say(f"  {release}: {BACKENDS['cuda'].install_toolkit(store, release.version, release.toolkit, system=True)}")


def compile_steps(output: str) -> list[tuple[str, str, str]]:
    """(tool, source, variant) of every compile ninja ran, from kbuild's plain progress lines."""
    return [(m[3], m[4], m[5]) for m in STEP.finditer(output)]


def cache_line(output: str) -> str:
    return next(iter(re.findall(r"compile cache: .*", output)), "")


def clean(ws: Path) -> None:
    for folder in [ws, *(ws / "kernels").iterdir()]:
        for name in ("build", ".kbuild"):
            shutil.rmtree(folder / name, ignore_errors=True)


def plan_matrix(ws: Path, jobs: int) -> list:
    """kbuild's plan of `kbuild build ws --all -j jobs`: each compiled variant's units and their flags."""
    options = BuildOptions(folder=ws, compile_jobs=jobs, python=sys.executable, cache_dir=CACHE, all_variants=True,
                           cuda_home=os.environ.get("CUDA_HOME"), toolchains_dir=TOOLCHAINS,
                           torch_index=os.environ.get("KBUILD_TORCH_INDEX") or PYPI)
    planned, failed = plan_kernels(options, Reporter(plain=True), {})
    if failed:
        raise SystemExit(f"kbuild's plan failed: {failed}")
    return planned


def dropped_nvcc_flags(planned: list) -> set[str]:
    """torch's common nvcc flags that kbuild's nvcc units leave out (the defines that disable the
    half/bfloat16 operators), read from kbuild's plan."""
    return {f for job in planned for v in job.plan.variants for u in v.units if u.tool == "nvcc"
            for f in job.toolchain.torch.facts["cuda"]["common_nvcc_flags"] if f not in u.flags}


def baseline(planned: list, dropped: set[str], work: Path, jobs: int) -> dict:
    """Each compiled variant of kbuild's plan built by cpp_extension.load, one after another."""
    # load() runs `ninja` from PATH, and puts a ccache it finds there in front of the compilers
    (work / "bin").mkdir()
    (work / "bin" / "ninja").symlink_to(ninja_binary())
    env = {**os.environ, "MAX_JOBS": str(jobs), "PATH": f"{work / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
           "TORCH_NO_COMPILER_WRAPPER": "1", "CCACHE_DISABLE": "1"}
    variants, compiles = {}, 0
    for job in planned:
        for v in (v for v in job.plan.variants if v.compiled):
            compiles += len(v.units)
            name = f"{job.plan.manifest.name}/{v.name}"
            spec, cuda_home = load_spec(job, v, dropped, work / "baseline" / name)
            start = time.perf_counter()
            done = subprocess.run([job.toolchain.torch.python, "-c", BASELINE, json.dumps(spec)],
                                  env={**env, **cuda_home}, capture_output=True, text=True)
            wall = time.perf_counter() - start
            lines = done.stdout.strip().splitlines()
            result = json.loads(lines[-1]) if done.returncode == 0 and lines else {"error": done.stderr[-3000:]}
            if not (Path(spec["dir"]) / f"{v.ops_name}.so").is_file():
                raise SystemExit(f"baseline {name} failed:\n{result['error']}")
            variants[name] = {"load_s": result.get("seconds", wall), "wall_s": wall, "load_error": result["error"]}
            note = f" (built; loading it failed: {result['error'].splitlines()[-1]})" if result["error"] else ""
            say(f"  baseline {name}: {variants[name]['load_s']:.1f} s in load(), {wall:.1f} s wall{note}")
    return {"seconds": sum(v["load_s"] for v in variants.values()), "compiles": compiles,
            "wall_s": sum(v["wall_s"] for v in variants.values()), "variants": variants}


def load_spec(job, v, dropped: set[str], folder: Path) -> tuple[dict, dict]:
    """load()'s arguments for variant `v`: kbuild's flags of its units (the C++ units' flags
    merged, as load() gives every .cpp the same), registration.h in a folder of its own; and the
    CUDA_HOME to run it with."""
    (folder / "include").mkdir(parents=True)
    shutil.copyfile(REPO / "builder" / "templates" / "registration.h", folder / "include" / "registration.h")
    generated = f"-I{job.plan.manifest.root / '.kbuild' / 'include'}"
    common = set(job.toolchain.torch.facts["cuda"]["common_nvcc_flags"])  # load() adds these itself
    cflags, cuda_cflags, ldflags = [], [], []
    for unit in v.units:
        flags = [f"-I{folder / 'include'}" if f == generated else f for f in unit.flags]
        if unit.tool == "cxx":
            cflags += [f for f in flags if f not in cflags]
        else:
            cuda_cflags += [f for f in flags if f not in common]
    env = {}
    if cuda_cflags:
        cuda = job.toolchain.toolkits["cuda"]
        cuda_cflags += [f"-U{d[2:]}" for d in sorted(dropped) if d.startswith("-D")]
        env["CUDA_HOME"] = cuda.home
        if not (Path(cuda.lib_dir) / "libcudart.so").exists():
            # NVIDIA's toolkit wheels ship libcudart.so.13 but no libcudart.so for load()'s -lcudart
            (folder / "cudart").mkdir()
            (folder / "cudart" / "libcudart.so").symlink_to(Path(cuda.lib_dir) / f"libcudart.so.{cuda.version[0]}")
            ldflags.append(f"-L{folder / 'cudart'}")
    spec = {"name": v.ops_name, "sources": [str(u.source) for u in v.units], "cflags": cflags,
            "cuda_cflags": cuda_cflags, "ldflags": ldflags, "dir": str(folder)}
    return spec, env


def per_tu(sources: list[Path], dropped: set[str], work: Path, store: ToolchainStore) -> dict:
    """nvcc 13.0, sm_80 + sm_90, torch 2.14's include paths, no cache: each .cu as it is and with
    torch/extension.h prepended (written elsewhere; -I its folder keeps its own includes working)."""
    torch_table, toolkits, _ = load_table()
    torch = probe_torch(store.torch_python(torch_table[(2, 14)].version, "cuda", reuse=(sys.executable,)),
                        CACHE / "probes")
    options = SimpleNamespace(probe_dir=CACHE / "probes")  # what provision_toolkit reads of the build options
    home = BACKENDS["cuda"].provision_toolkit(store, toolkits["cuda"][(13, 0)], options).home
    flags = [*(f for f in torch.facts["cuda"]["common_nvcc_flags"] if f not in dropped), "-DENABLE_FP8", "-std=c++20",
             "-Xcompiler", "-O3", "-Xcompiler", "-fPIC", f"-D_GLIBCXX_USE_CXX11_ABI={int(torch.cxx11)}",
             "-gencode=arch=compute_80,code=sm_80", "-gencode=arch=compute_90,code=sm_90",
             *(f"-I{p}" for p in torch.include_paths), f"-I{torch.python_include}", f"-I{home}/include"]
    out = {}
    for source in sources:
        with_torch = work / "tu" / f"torch_{source.name}"
        with_torch.parent.mkdir(exist_ok=True)
        with_torch.write_text("#include <torch/extension.h>\n" + source.read_text())
        times = []
        for src in (source, with_torch):
            start = time.perf_counter()
            done = subprocess.run([f"{home}/bin/nvcc", *flags, f"-I{source.parent}", "-c", str(src), "-o",
                                   str(work / "tu" / "out.o")], capture_output=True, text=True)
            times.append(time.perf_counter() - start)
            if done.returncode != 0:
                raise SystemExit(f"nvcc {src} failed:\n{(done.stdout + done.stderr)[-4000:]}")
        out[source.name] = {"plain_s": times[0], "with_torch_extension_h_s": times[1], "ratio": times[1] / times[0]}
        say(f"  {source.name}: {times[0]:.1f} s; with torch/extension.h {times[1]:.1f} s ({times[1] / times[0]:.1f}x)")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", nargs="+", default=sorted(p.name for p in (REPO / "kernels").iterdir()
                                                               if (p / "build.toml").is_file()))
    parser.add_argument("--torch", nargs="+", default=[], help="narrow the matrix's torch releases (2.14 …)")
    parser.add_argument("--cuda", nargs="+", default=[], help="narrow the matrix's CUDA versions (13.0 …)")
    parser.add_argument("--archs", nargs="+", default=[], help="cuda-capabilities for every .cu (8.0 …)")
    parser.add_argument("--skip-baseline", action="store_true")
    parser.add_argument("--skip-tu", action="store_true", help="leave out the per-TU figures")
    parser.add_argument("--jobs", type=int, default=os.cpu_count())
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "build_matrix_results.json")
    parser.add_argument("--keep", action="store_true", help="keep the temporary workspace")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kbuild-matrix-"))
    try:
        results = run(args, work)
    finally:
        if args.keep:
            say(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    report(results)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    say(f"wrote {args.out}")
    return 0


def run(args, work: Path) -> dict:
    ws = make_workspace(work, args.kernels, args.torch, args.cuda, args.archs)
    targets = matrix_targets(ws)
    compiled = sorted(f"{kernel}/{variant}" for kernel, variant, _ in targets)
    say(f"workspace {ws}: {len(compiled)} compiled variants, -j {args.jobs}")
    results: dict[str, Any] = {
        "config": {"kernels": args.kernels, "torch": args.torch, "cuda": args.cuda, "archs": args.archs,
                   "jobs": args.jobs, "variants": compiled}}
    store = ToolchainStore(TOOLCHAINS, torch_index=os.environ.get("KBUILD_TORCH_INDEX") or PYPI,
                           log=lambda line: say(f"  {line}"))
    say("provisioning (one-time) …")
    start = time.perf_counter()
    provision([t for _, _, t in targets], store, not args.skip_tu)
    results["provisioning_s"] = time.perf_counter() - start
    say(f"provisioning: {results['provisioning_s']:.1f} s")

    build = ["build", str(ws), "--all", "-j", str(args.jobs)]
    env = {"CCACHE_DIR": str(work / "ccache")}
    cold, output = kbuild(*build, env=env)
    steps = compile_steps(output)
    results["cold"] = {"kbuild_s": cold, "compile_steps": len(steps), "cache": cache_line(output)}
    say(f"cold kbuild build --all: {cold:.1f} s, {len(steps)} compile steps ({cache_line(output)})")

    noop, output = kbuild(*build, env=env)
    results["noop"] = {"seconds": noop, "compile_steps": len(compile_steps(output)), "met": noop < 1.0}
    say(f"no-op: {noop:.2f} s, {len(compile_steps(output))} compile steps")

    cu = [p for k in args.kernels for p in sorted((ws / "kernels" / k).rglob("*.cu"))]
    touched = next((p for p in cu if p.name == "rmsnorm.cu"), cu[0] if cu else None)
    if touched:
        kernel = touched.relative_to(ws / "kernels").parts[0]
        expected = len({t.toolkit for k, _, t in targets if k == kernel and t.toolkit})
        touched.touch()
        seconds, output = kbuild(*build, env=env)
        ran = compile_steps(output)
        which = [f"{Path(src).name} ({variant})" for _, src, variant in ran]
        results["touch"] = {"file": str(touched.relative_to(ws)), "seconds": seconds, "compile_steps": len(ran),
                            "expected": expected, "which": which, "met": len(ran) == expected}
        say(f"touch {touched.name}: {len(ran)} compile steps (expected {expected}) in {seconds:.1f} s: {which}")

    clean(ws)
    warm, output = kbuild(*build, env=env)
    results["warm"] = {"seconds": warm, "ratio_to_cold": warm / cold, "cache": cache_line(output),
                       "met": warm <= 0.15 * cold}
    say(f"build/ and .kbuild/ deleted, rebuilt with the warm cache: {warm:.1f} s ({cache_line(output)})")

    planned = plan_matrix(ws, args.jobs) if not (args.skip_baseline and args.skip_tu) else []
    dropped = dropped_nvcc_flags(planned)
    if not args.skip_baseline:
        say("baseline: torch.utils.cpp_extension.load per variant, one after another …")
        base = baseline(planned, dropped, work, args.jobs)
        results["cold"].update(baseline_s=base["seconds"], baseline_wall_s=base["wall_s"],
                               baseline_compiles=base["compiles"],
                               baseline_variants=base["variants"], ratio=cold / base["seconds"],
                               met=cold <= 0.6 * base["seconds"])

    if not args.skip_tu:
        say("per-TU compile time (nvcc 13.0, sm_80 + sm_90, no cache) …")
        if cu and not dropped:
            raise SystemExit("per-TU figures: kbuild's plan has no nvcc unit to read its flags from (--skip-tu)")
        results["per_tu"] = per_tu(cu, dropped, work, store)
    return results


def report(r: dict) -> None:
    def met(ok) -> str:
        return "" if ok is None else ("met" if ok else "NOT met")

    cold = r["cold"]
    base = (f"{cold['baseline_s']:.1f} s, {cold['baseline_compiles']} compiles ({cold['baseline_wall_s']:.1f} s wall)"
            if "baseline_s" in cold else "skipped")
    rows = [("provisioning (one-time)", f"{r['provisioning_s']:.1f} s", "", "", ""),
            ("cold matrix build", f"{cold['kbuild_s']:.1f} s, {cold['compile_steps']} compiles", base,
             f"{cold['ratio']:.2f}x" if "ratio" in cold else "", f"<= 0.6x {met(cold.get('met'))}"),
            ("no-op rebuild", f"{r['noop']['seconds']:.2f} s", "", "", f"< 1 s {met(r['noop']['met'])}")]
    if "touch" in r:
        t = r["touch"]
        rows.append((f"touch {Path(t['file']).name}", f"{t['compile_steps']} compiles, {t['seconds']:.1f} s", "",
                     "", f"== {t['expected']} {met(t['met'])}"))
    w = r["warm"]
    rows.append(("clean rebuild, warm cache", f"{w['seconds']:.1f} s", "", f"{w['ratio_to_cold']:.2f}x cold",
                 f"<= 0.15x {met(w['met'])}"))
    for name, tu in r.get("per_tu", {}).items():
        rows.append((f"TU {name}: as is / +torch/extension.h", f"{tu['plain_s']:.1f} s",
                     f"{tu['with_torch_extension_h_s']:.1f} s", f"{tu['ratio']:.1f}x", ""))
    header = ("figure", "kbuild", "baseline", "ratio", "target")
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(5)]
    for row in [header, tuple("-" * n for n in widths), *rows]:
        say("  ".join(str(c).ljust(n) for c, n in zip(row, widths, strict=True)).rstrip())


if __name__ == "__main__":
    sys.exit(main())
