"""The ABI floor of every first-party variant built here, before and after the manylinux route.

    python bench/abi_floor.py [--variant V ...] [--cuda-archs 8.0] [--out bench/abi_floor_results.json]

Copies the repository's kernels into a scratch workspace (a git repo, so builds have a source id)
and builds the named variants twice, cold (no compile cache): with the host's glibc and libstdc++ (`kbuild build`), then
against the glibc 2.28 sysroot (`kbuild build --manylinux 2_28`, into a second copy). Each
variant's floor is read back from its metadata.json `abi` record (what `kbuild build` measured
with pyelftools and auditwheel's policies). After the manylinux build, `kbuild test` runs each
variant's own tests where this machine can (CPU variants; CUDA ones need a GPU: the H200 run,
bench/gpu/corpus_x2.sh lane E, covers those). Prints a markdown table; writes JSON.

The floor does not depend on the CUDA archs, so CUDA variants build for one (--cuda-archs,
default 8.0) to keep the run short.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from builder.config import from_environment  # noqa: E402
from builder.toolchains import ToolchainStore, load_versions_table  # noqa: E402
from kbuild.variants import COMPILED, parse_variant  # noqa: E402

KBUILD = [sys.executable, "-m", "builder.commands.main"]
DEFAULT_VARIANTS = (  # every compiled first-party variant of the matrix (rotary is Python only)
    *(f"torch-stable-abi210-{c}-x86_64-linux" for c in ("cpu", "cu130", "cu132")),
    *(f"torch{t}-cxx11-{c}-x86_64-linux" for t in ("213", "214") for c in ("cpu", "cu130", "cu132")),
)


def workspace(dest: Path) -> Path:
    shutil.copytree(REPO / "kernels", dest, ignore=shutil.ignore_patterns("build", ".kbuild", "__pycache__"))
    (dest / "build.toml").write_text('[workspace]\nmembers = ["activation", "rmsnorm", "rotary"]\n')
    for cmd in (["init", "-q"], ["add", "-A"], ["-c", "user.email=bench@localhost", "-c", "user.name=bench",
                                                "commit", "-qm", "bench"]):
        subprocess.run(["git", *cmd], cwd=dest, check=True)
    return dest


def build(ws: Path, variants, archs: str, extra=()) -> float:
    cmd = [*KBUILD, "build", str(ws), "--no-cache", "--cuda-archs", archs,
           *[a for v in variants for a in ("--variant", v)], *extra]
    start = time.monotonic()
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    print(done.stdout + done.stderr, file=sys.stderr)
    return time.monotonic() - start


def floors(ws: Path) -> dict[str, dict]:
    found = {}
    for meta in sorted(ws.glob("*/build/*/metadata.json")):
        abi = json.loads(meta.read_text()).get("abi")
        if abi:
            found[f"{meta.parents[2].name}/{meta.parent.name}"] = abi
    return found


def cpu_tests(ws: Path, names) -> dict[str, str]:
    """Each CPU variant's own tests, in the torch it was built for (another release's from the
    toolchain store, where the build provisioned it)."""
    results = {}
    for name in names:
        kernel, variant = name.split("/")
        if "-cpu-" not in variant:
            continue
        done = subprocess.run([*KBUILD, "test", str(ws / kernel), "--variant", variant, *_python_for(variant)],
                              cwd=REPO, capture_output=True, text=True)
        line = next((ln for ln in (done.stdout + done.stderr).splitlines() if ln.startswith(("passed", "failed"))), "")
        results[name] = line.split(" — ")[-1] if line else f"exit {done.returncode}"
    return results


def _python_for(variant: str) -> list[str]:
    parsed = parse_variant(variant)
    release = parsed.torch  # (2, 13); a stable-ABI variant loads in this environment's torch
    import torch

    if (parsed.kind != COMPILED or release is None  # a compiled variant always names its torch
            or tuple(int(x) for x in torch.__version__.split(".")[:2]) == release):
        return []
    version = load_versions_table()["torch"][f"{release[0]}.{release[1]}"]["version"]
    python = ToolchainStore(from_environment().toolchains_dir).torch_python(version)
    subprocess.run([python, "-m", "pip", "install", "-q", "pytest", "numpy"], check=True)  # what the suites import
    return ["--python", python]


def describe(abi: dict | None) -> str:
    if not abi:
        return "not built"
    return f"{abi['manylinux']} (glibc {abi.get('glibc', '-')}, GLIBCXX {abi.get('glibcxx', '-')})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variant", action="append", default=None)
    parser.add_argument("--cuda-archs", default="8.0")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "abi_floor_results.json")
    args = parser.parse_args()
    variants = tuple(args.variant or DEFAULT_VARIANTS)
    os.environ.setdefault("CUDA_HOME", "/usr/local/cuda")
    with tempfile.TemporaryDirectory(prefix="kbuild-floor-") as tmp:
        host, old = workspace(Path(tmp) / "host"), workspace(Path(tmp) / "manylinux")
        host_s = build(host, variants, args.cuda_archs)
        old_s = build(old, variants, args.cuda_archs, ("--manylinux", "2_28"))
        before, after = floors(host), floors(old)
        tests = cpu_tests(old, after)
    rows = []
    print("| variant | host build (glibc 2.36, gcc 12) | `--manylinux 2_28` (sysroot) "
          "| its tests here, manylinux build |")
    print("|---|---|---|---|")
    for name in sorted(set(before) | set(after)):
        rows.append({"variant": name, "before": before.get(name), "after": after.get(name), "tests": tests.get(name)})
        print(f"| {name} | {describe(before.get(name))} | {describe(after.get(name))} "
              f"| {tests.get(name, 'CUDA: no GPU here')} |")
    print(f"\nbuild wall time: host {host_s:.1f} s, manylinux {old_s:.1f} s (--cuda-archs {args.cuda_archs})")
    doc = {"variants": rows, "host_build_s": round(host_s, 1), "manylinux_build_s": round(old_s, 1),
           "cuda_archs": args.cuda_archs}
    args.out.write_text(json.dumps(doc, indent=2) + "\n")
    return 0 if after and all(r["after"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
