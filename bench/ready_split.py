"""Time to ready, split (issue 33): from a bare process to a kernel that computed once, through
kbuild's `get_kernel` and through Hugging Face's `kernels`, both from one `kbuild hub serve`, each
phase timed inside the real loaders.

    python bench/ready_split.py KERNEL_DIR --setup CODE --call CODE [--python PY] [--runs 5]
        [--build-args "..."] [--out FILE.json]

KERNEL_DIR is built (`kbuild build --python PY`, plus --build-args) and published to a fresh hub
(its build.toml's repo id, branch v<version>). Then, in fresh processes of PY (the interpreter
whose torch both loaders load into; HF's loader takes a CUDA variant on any CUDA build of torch,
so a CPU variant needs a CPU torch), each loader loads it `--runs` times with an empty cache (cold)
and with a warm one. Each phase is the time spent inside these calls, less what nested phases took:
- find: kbuild's detect_system + Session.resolve + judge_metadata; HF's resolve_kernel_tree +
  validate_metadata (the system and its GPU, the refs, the variant's metadata, the choice; on a GPU
  both include torch's CUDA init, which asking for the device's capability starts);
- fetch + verify: kbuild's Session.install (download, digest check, cache marker); HF's
  DepTreeNode.install (snapshot download; HF checks no digest);
- dlopen: the extension's ExtensionFileLoader.create_module + exec_module, i.e. dlopen with the
  library's static initializers (CUDA fatbin registration, TORCH_LIBRARY op registration) and
  PyInit: the kernel's own cost, the same under either loader;
- python import: the variant's package import less dlopen (kbuild's load_variant, HF's
  DepTreeNode.load);
- first call: `--call` after `--setup` (untimed), with a CUDA sync when torch has a GPU: the
  kernel's own (lazy CUDA module loading lands here);
- other: the rest of get_kernel (argument checks, settings, hub client set-up).
`import torch` comes before and is not counted; the loader's own import is (`loader import`).
Prints a table of medians and writes JSON (--out).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # builder/_toml.py's choice; this script does not put the repo root on sys.path
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from loader import start_server  # noqa: E402

PHASES = ("loader import", "find", "fetch + verify", "python import", "dlopen", "first call", "other")

_PROBE = r"""
import json, sys, time, importlib.machinery as machinery
loader, repo, version, setup, call = sys.argv[1:6]
import torch
spent, nested = {}, []

def timed(owner, attr, phase):
    inner = getattr(owner, attr)
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        nested.append(0.0)
        try:
            return inner(*args, **kwargs)
        finally:
            took = time.perf_counter() - start
            own = took - nested.pop()
            spent[phase] = spent.get(phase, 0.0) + own
            if nested:
                nested[-1] += took
    setattr(owner, attr, wrapper)

began = time.perf_counter()
if loader == "kbuild":
    import kbuild, kbuild.hub_loader as hl
    spent["loader import"] = time.perf_counter() - began
    for attr in ("resolve", "judge_metadata"):
        timed(hl.Session, attr, "find")
    # the GPU probe (torch's CUDA init) is finding too: HF's lands in its find (validate_metadata)
    timed(hl, "detect_system", "find")
    timed(hl.Session, "install", "fetch + verify")
    timed(hl, "load_variant", "python import")
    load = lambda: kbuild.get_kernel(f"{repo}@v{version}", trust_remote_code=True)
else:
    import kernels, kernels.load as kl, kernels.deps as kd
    spent["loader import"] = time.perf_counter() - began
    timed(kl, "resolve_kernel_tree", "find")
    timed(kd.DepTreeNode, "validate_metadata", "find")
    timed(kd.DepTreeNode, "install", "fetch + verify")
    timed(kd.DepTreeNode, "load", "python import")
    load = lambda: kernels.get_kernel(repo, version=int(version), trust_remote_code=True)
# after the loaders' own imports: HF's loads its Rust extension
timed(machinery.ExtensionFileLoader, "create_module", "dlopen")
timed(machinery.ExtensionFileLoader, "exec_module", "dlopen")
started = time.perf_counter()
k = load()
spent["other"] = time.perf_counter() - started - sum(v for p, v in spent.items() if p != "loader import")
scope = {"k": k, "torch": torch}
exec(setup, scope)
started = time.perf_counter()
exec(call, scope)
if torch.cuda.is_available():
    torch.cuda.synchronize()
spent["first call"] = time.perf_counter() - started
spent["ready"] = time.perf_counter() - began
print(json.dumps({"spent": spent, "file": k.__file__, "torch": torch.__version__}))
"""


def publish(kernel: Path, work: Path, python: str, build_args: list[str]) -> tuple[str, int]:
    """The kernel copied, committed, built for `python`'s torch and published: (repo id, version)."""
    src = shutil.copytree(kernel, work / kernel.name, ignore=shutil.ignore_patterns("build", ".kbuild", ".git"))
    git = ["git", "-c", "user.name=bench", "-c", "user.email=bench@localhost"]
    for cmd in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "kernel"]):
        subprocess.run(git + cmd, cwd=src, check=True)
    repo, version = repo_of(src)
    env = {**os.environ, "KBUILD_CACHE": str(work / "build-cache")}
    # --cuda-archs in build_args builds fewer archs than a release: published all the same. Into the
    # served folder, not over HTTP: HTTP publishing needs huggingface_hub >= 2.3, which transformers
    # before 5.21 (the H200's image) rules out; the loaders still fetch over HTTP.
    for cmd in (["build", str(src), "--python", python, *build_args],
                ["publish", str(src), "--hub", str(work / "hub"), "--repo-id", repo, "--allow-partial-archs"]):
        print(f"kbuild {cmd[0]} …", file=sys.stderr, flush=True)
        done = subprocess.run([sys.executable, "-m", "builder.commands.main", *cmd], cwd=ROOT, env=env,
                              capture_output=True, text=True)
        if done.returncode:
            sys.exit(f"kbuild {cmd[0]} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return repo, version


def repo_of(kernel: Path) -> tuple[str, int]:
    """The kernel's repo id ([general.hub] repo-id, else bench/<name>) and major version."""
    general = tomllib.loads((kernel / "build.toml").read_text())["general"]
    return general.get("hub", {}).get("repo-id") or f"bench/{general['name']}", int(general["version"])


def probe(loader: str, python: str, env: dict, repo: str, version: int, setup: str, call: str) -> dict:
    done = subprocess.run([python, "-c", _PROBE, loader, repo, str(version), setup, call], env=env, cwd=ROOT,
                          capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"{loader} did not load {repo}@v{version}:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("kernel", type=Path)
    p.add_argument("--setup", default="", help="Python run before the first call, untimed (the module is `k`)")
    p.add_argument("--call", required=True, help="the first call, timed (the module is `k`)")
    p.add_argument("--python", default=sys.executable, help="the interpreter (and torch) both loaders run in")
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--build-args", default="", help="more arguments for `kbuild build`, e.g. \"--cuda-archs 9.0a\"")
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "ready_split_results.json")
    args = p.parse_args()
    if not (args.kernel / "build.toml").is_file():
        sys.exit(f"{args.kernel}: no build.toml (pass a kernel project folder)")
    work = Path(tempfile.mkdtemp(prefix="kbuild-ready-"))
    server = None
    try:
        server, url, _ = start_server(work, trusted=repo_of(args.kernel)[0].split("/")[0])
        repo, version = publish(args.kernel.resolve(), work, args.python, args.build_args.split())
        env = {k: v for k, v in os.environ.items() if not k.startswith(("KBUILD_", "HF_", "KERNELS_"))}
        env.update(HF_ENDPOINT=url, KBUILD_HUB=url, KBUILD_CACHE=str(work / "kbuild-cache"),
                   HF_HOME=str(work / "hf-home"), HF_HUB_DISABLE_PROGRESS_BARS="1",
                   PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
        rows = {}
        for loader in ("kbuild", "hf"):
            for mode in ("cold", "warm"):
                runs = []
                for _ in range(args.runs):
                    if mode == "cold":
                        for cache in ("kbuild-cache", "hf-home"):
                            shutil.rmtree(work / cache, ignore_errors=True)
                    runs.append(probe(loader, args.python, env, repo, version, args.setup, args.call))
                rows[f"{loader} {mode}"] = {
                    phase: statistics.median(r["spent"].get(phase, 0.0) for r in runs) for phase in (*PHASES, "ready")}
                rows[f"{loader} {mode}"]["file"] = runs[-1]["file"]
    finally:
        if server is not None:
            server.terminate()
            server.wait(10)
        shutil.rmtree(work, ignore_errors=True)
    args.out.write_text(json.dumps({"kernel": f"{repo}@v{version}", "runs": args.runs, "setup": args.setup,
                                    "call": args.call, "torch": runs[-1]["torch"], "rows": rows}, indent=2) + "\n")
    names = list(rows)
    print(f"time to ready, {repo}@v{version}, torch {runs[-1]['torch']}, medians of {args.runs} fresh processes (ms)")
    print(f"{'phase':16}" + "".join(f"{n:>12}" for n in names))
    for phase in (*PHASES, "ready"):
        print(f"{phase:16}" + "".join(f"{rows[n][phase] * 1000:12.1f}" for n in names))
    return 0


if __name__ == "__main__":
    sys.exit(main())
