"""`kbuild toolchain list|install|prune`: the torch environments and nvcc installs kbuild keeps
for matrix builds (builder/toolchains/provision.py), under $KBUILD_TOOLCHAINS, else
~/.cache/kbuild/toolchains; the SPECs install takes are builder/toolchains/spec.py's.

    kbuild toolchain install torch-2.13 torch-2.14+cuda cuda-13.2
    kbuild toolchain list [--json]
    kbuild toolchain prune [NAME...] [--all] [--dry-run]
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict

from builder.commands.arguments import open_store
from builder.config.environment import from_environment as builder_settings
from kbuild_common.errors import KbuildError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from builder.report import Reporter


def add_parser(subparsers) -> None:
    top = subparsers.add_parser("toolchain", help="list, install and prune the torch/nvcc toolchains of matrix builds")
    sub = top.add_subparsers(dest="toolchain_command", required=True, metavar="ACTION")

    p = sub.add_parser("list", help="the installed toolchains and the system CUDA")
    p.add_argument("--json", action="store_true", help="print a machine-readable listing")
    p.set_defaults(handler=run_list)

    p = sub.add_parser("install", help="install toolchains: torch-2.13, torch-2.13.0, torch-2.13+cuda, cuda-13.2, "
                                       "cutlass-4.2 (CUTLASS headers), sysroot-2.28 (glibc 2.28 for manylinux_2_28)")
    p.add_argument("specs", nargs="+", metavar="SPEC",
                   help="toolchains to install, e.g. torch-2.13, torch-2.13+cuda, cuda-13.2, cutlass-4.2, sysroot-2.28")
    p.add_argument("--no-system-cuda", action="store_true",
                   help="install NVIDIA's wheels even when the system CUDA is this version")
    p.set_defaults(handler=run_install)

    p = sub.add_parser("prune", help="remove toolchains (and leftovers of interrupted installs)")
    p.add_argument("names", nargs="*", metavar="NAME", help="toolchains to remove (kbuild toolchain list)")
    p.add_argument("--all", action="store_true", help="remove every toolchain in the store")
    p.add_argument("--dry-run", action="store_true", help="print what would be removed; remove nothing")
    p.set_defaults(handler=run_prune)


def run_list(args, reporter: Reporter) -> int:
    from builder.report import human_size
    from builder.toolchains.toolchain import find_cuda

    store = open_store()
    records = store.list()
    try:
        cuda = find_cuda(None)
    except KbuildError:  # no system CUDA: the listing says nothing of it
        cuda = None
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


def run_install(args, reporter: Reporter) -> int:
    from builder.toolchains.versions import load_versions_table
    from builder.toolchains.spec import install, parse_spec

    table = load_versions_table()
    specs = [parse_spec(text, table) for text in args.specs]  # all checked before anything installs
    store = open_store(log=reporter.info)
    for spec in specs:
        start = time.monotonic()
        done = install(store, spec, system_cuda=not args.no_system_cuda, cxx=builder_settings().cxx)
        reporter.result(f"{spec.name}: {done} ({time.monotonic() - start:.1f}s)")
    return 0


def run_prune(args, reporter: Reporter) -> int:
    from builder.report import human_size
    from builder.toolchains.prune import prune

    store = open_store()
    verb = "would remove" if args.dry_run else "removed"
    freed, count = 0, 0
    for gone in prune(store, args.names, every=args.all, dry_run=args.dry_run):
        if gone.name:
            reporter.result(f"{verb} {gone.name} ({human_size(gone.size)}) {gone.path}")
        else:
            reporter.result(f"{verb} {gone.path} ({human_size(gone.size)}, {gone.why})")
        freed, count = freed + gone.size, count + 1
    if count:
        reporter.result(f"{'would free' if args.dry_run else 'freed'} {human_size(freed)} in {store.root}")
    else:
        reporter.result(f"nothing to prune in {store.root}")
    return 0
