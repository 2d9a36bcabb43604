"""`kbuild toolchain list|install|prune`: the torch environments and nvcc installs kbuild keeps
for matrix builds (builder/toolchains/provision.py), under $KBUILD_TOOLCHAINS, else ~/.cache/kbuild/toolchains.

    kbuild toolchain install torch-2.13 torch-2.14+cuda cuda-13.2
    kbuild toolchain list [--json]
    kbuild toolchain prune [NAME...] [--all] [--dry-run]

A SPEC is torch-X.Y (the release versions.toml pins), torch-X.Y.Z, either with +cuda for the CUDA
build from $KBUILD_TORCH_INDEX (default PyPI), cuda-X.Y, cutlass-X.Y (the headers of PyPI's
nvidia-cutlass X.Y, a release versions.toml lists), or sysroot-X.Y (glibc X.Y headers and link
stubs for manylinux_X_Y builds, builder/toolchains/sysroot.py). The CLI wires this in with
`toolchain_cli.add_parsers(sub)`; `open_store()` is how other commands get the same store.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

from builder.project.dependencies import cutlass_for
from builder.errors import KbuildError, UsageError
from builder.toolchains.provision import ToolchainStore, disk_usage, load_versions_table
from builder.config.settings import from_environment
from builder.toolchains.toolchain import find_cuda


def store_root() -> Path:
    return from_environment().toolchains_dir


def open_store(log: Callable[[str], None] | None = None) -> ToolchainStore:
    """The toolchain store the environment names: $KBUILD_TOOLCHAINS, $KBUILD_TORCH_INDEX."""
    env = from_environment()
    return ToolchainStore(env.toolchains_dir, torch_index=env.torch_index, log=log, probe_dir=env.probe_dir)


@dataclass(frozen=True)
class Spec:
    kind: str              # "torch" | "cuda" | "cutlass" | "sysroot"
    version: str           # 2.13.0 | 13.2 | 4.2.0.0 | 2.28 (glibc)
    cuda: bool = False     # torch: the CUDA build
    requirement: str = ""  # cuda, cutlass: the pip requirement providing nvcc / the headers

    @property
    def name(self) -> str:
        return f"{self.kind}-{self.version}{'+cuda' if self.cuda else ''}"


def parse_spec(text: str, table: dict) -> Spec:
    """torch-2.13 / torch-2.13.0 / torch-2.13+cuda / cuda-13.2, resolved through versions.toml."""
    torches, cudas = table.get("torch", {}), table.get("cuda", {})
    if m := re.fullmatch(r"torch-(\d+\.\d+)(\.\d+[a-z0-9.]*)?(\+cuda)?", text):
        if m[1] in torches:
            version = m[1] + m[2] if m[2] else torches[m[1]]["version"]
            return Spec("torch", version, cuda=bool(m[3]))
    elif m := re.fullmatch(r"cuda-(\d+\.\d+)", text):
        if m[1] in cudas:
            return Spec("cuda", m[1], requirement=cudas[m[1]]["toolkit"])
    elif text.startswith("cutlass-"):
        cutlass = table.get("cutlass", {})
        if release := cutlass_for(text, cutlass.get("releases", [])):
            return Spec("cutlass", release.release, requirement=cutlass["requirement"].format(release=release.release))
    elif m := re.fullmatch(r"sysroot-(\d+)\.(\d+)", text):
        from builder.project.manylinux import policy_error  # auditwheel: not needed to build the parser

        if "sysroot" in table and not policy_error(f"{m[1]}_{m[2]}"):
            return Spec("sysroot", f"{m[1]}.{m[2]}", requirement=table["sysroot"]["requirement"])
        raise UsageError(f"unknown toolchain {text!r}: no manylinux_{m[1]}_{m[2]} policy for a glibc "
                         f"{m[1]}.{m[2]} sysroot (e.g. sysroot-2.28, sysroot-2.17)")
    known = [f"torch-{v}" for v in torches] + [f"cuda-{v}" for v in cudas] + sorted(
        {"cutlass-" + ".".join(r.split(".")[:2]) for r in table.get("cutlass", {}).get("releases", [])})
    raise UsageError(f"unknown toolchain {text!r}: expected one of {', '.join(known)} "
                     "(torch-X.Y.Z for another release of a known torch, +cuda for a torch's CUDA build)")


def add_parsers(subparsers) -> None:
    top = subparsers.add_parser("toolchain", help="list, install and prune the torch/nvcc toolchains of matrix builds")
    sub = top.add_subparsers(dest="toolchain_command", required=True, metavar="ACTION")

    p = sub.add_parser("list", help="the installed toolchains and the system CUDA")
    p.add_argument("--json", action="store_true", help="print a machine-readable listing")
    p.set_defaults(handler=_list)

    p = sub.add_parser("install", help="install toolchains: torch-2.13, torch-2.13.0, torch-2.13+cuda, cuda-13.2, "
                                       "cutlass-4.2 (CUTLASS headers), sysroot-2.28 (glibc 2.28 for manylinux_2_28)")
    p.add_argument("specs", nargs="+", metavar="SPEC",
                   help="toolchains to install, e.g. torch-2.13, torch-2.13+cuda, cuda-13.2, cutlass-4.2, sysroot-2.28")
    p.add_argument("--no-system-cuda", action="store_true",
                   help="install NVIDIA's wheels even when the system CUDA is this version")
    p.set_defaults(handler=_install)

    p = sub.add_parser("prune", help="remove toolchains (and leftovers of interrupted installs)")
    p.add_argument("names", nargs="*", metavar="NAME", help="toolchains to remove (kbuild toolchain list)")
    p.add_argument("--all", action="store_true", help="remove every toolchain in the store")
    p.add_argument("--dry-run", action="store_true", help="print what would be removed; remove nothing")
    p.set_defaults(handler=_prune)


def _system_cuda():
    try:
        return find_cuda(None)
    except KbuildError:
        return None


def _list(args, reporter) -> int:
    store = open_store()
    records = store.list()
    cuda = _system_cuda()
    if args.json:
        system = {"home": cuda.home, "nvcc": cuda.nvcc, "version": "%d.%d" % cuda.version} if cuda else None
        reporter.result(json.dumps({"root": str(store.root), "toolchains": [asdict(r) for r in records],
                                    "system_cuda": system}, indent=2))
        return 0
    if not records:
        reporter.result(f"no toolchains in {store.root}")
    for r in records:
        reporter.result(f"{r.name:<16} {r.kind:<5} {r.version:<8} {human_size(r.size_bytes):>8}  {r.detail}  {r.path}")
    if cuda:
        reporter.result(f"system CUDA {cuda.version[0]}.{cuda.version[1]} at {cuda.home} "
                        f"(used for cuda-{cuda.version[0]}.{cuda.version[1]})")
    return 0


def _install(args, reporter) -> int:
    table = load_versions_table()
    specs = [parse_spec(text, table) for text in args.specs]  # all checked before anything installs
    store = open_store(log=reporter.info)
    for spec in specs:
        start = time.monotonic()
        if spec.kind == "torch":
            python = store.torch_python(spec.version, cuda=spec.cuda)
            reporter.result(f"{spec.name}: {python} ({time.monotonic() - start:.1f}s)")
        elif spec.kind == "cutlass":
            dirs = store.cutlass_includes(spec.version, spec.requirement)
            reporter.result(f"{spec.name}: {' '.join(dirs)} ({time.monotonic() - start:.1f}s)")
        elif spec.kind == "sysroot":
            root = store.sysroot(spec.version, spec.requirement, cxx=from_environment().cxx)
            reporter.result(f"{spec.name}: {root} ({time.monotonic() - start:.1f}s)")
        else:
            major, minor = map(int, spec.version.split("."))
            home, how = store.cuda_home((major, minor), spec.requirement, system=not args.no_system_cuda)
            reporter.result(f"{spec.name}: {how}, CUDA_HOME={home} ({time.monotonic() - start:.1f}s)")
    return 0


def _prune(args, reporter) -> int:
    store = open_store()
    if args.all and args.names:
        raise UsageError("prune: pass toolchain names or --all, not both")
    records = {r.name: r for r in store.list()}
    unknown = [n for n in args.names if n not in records]
    if unknown:
        raise UsageError(f"prune: no toolchain {', '.join(unknown)} in {store.root} "
                         f"(installed: {', '.join(records) or 'none'})")
    doomed = list(records.values()) if args.all else [records[n] for n in args.names]
    verb = "would remove" if args.dry_run else "removed"
    freed = 0
    leftovers = store.leftovers()
    for path in leftovers:
        size = disk_usage(path)
        if not args.dry_run:
            store.remove_leftover(path)
        why = "the log of a failed install" if path.name.endswith(".install.log") else "left by an interrupted install"
        reporter.result(f"{verb} {path} ({human_size(size)}, {why})")
        freed += size
    for record in doomed:
        if not args.dry_run:
            store.remove(record.name)
        reporter.result(f"{verb} {record.name} ({human_size(record.size_bytes)}) {record.path}")
        freed += record.size_bytes
    if leftovers or doomed:
        reporter.result(f"{'would free' if args.dry_run else 'freed'} {human_size(freed)} in {store.root}")
    else:
        reporter.result(f"nothing to prune in {store.root}")
    return 0


def human_size(n: int) -> str:
    for unit in ("B", "kB", "MB"):
        if n < 1000:
            return f"{n:.0f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"
