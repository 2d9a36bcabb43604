"""`kbuild toolchain list|install|prune`: the torch environments and nvcc installs kbuild keeps
for matrix builds (builder/toolchains/provision.py), under $KBUILD_TOOLCHAINS, else
~/.cache/kbuild/toolchains; the SPECs install takes are builder/toolchains/spec.py's.

    kbuild toolchain install torch-2.13 torch-2.14+cuda cuda-13.2
    kbuild toolchain list [--json]
    kbuild toolchain prune [NAME...] [--all] [--dry-run]
    kbuild toolchain check-index [--write] [--index URL] [--json]

`check-index` asks the package index (PEP 691 JSON; --index, else KBUILD_TORCH_INDEX, else PyPI)
which torch releases exist and prints the versions-table rows kbuild lacks (builder/toolchains/
index_check.py); --write adds them to the overlay table (KBUILD_VERSIONS, else versions.toml in
kbuild's config folder). Exit 1 when the table lacks a release and nothing was written.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from typing import TYPE_CHECKING

from builder.commands.arguments import open_store
from builder.config.environment import from_environment as builder_settings
from kbuild_common.errors import KbuildError

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

    p = sub.add_parser("check-index", help="which torch releases the package index has that the versions table "
                                           "lacks, with the rows to add (their CUDA from each wheel's metadata)")
    p.add_argument("--index", default=None, metavar="URL",
                   help="a PEP 691 simple index (default: KBUILD_TORCH_INDEX, else https://pypi.org/simple)")
    p.add_argument("--write", action="store_true",
                   help="add the rows to the overlay table "
                        "(KBUILD_VERSIONS, else versions.toml in kbuild's config folder)")
    p.add_argument("--json", action="store_true", help="print a machine-readable record")
    p.set_defaults(handler=run_check_index)

    p = sub.add_parser("prune", help="remove toolchains (and leftovers of interrupted installs)")
    p.add_argument("names", nargs="*", metavar="NAME", help="toolchains to remove (kbuild toolchain list)")
    p.add_argument("--all", action="store_true", help="remove every toolchain in the store")
    p.add_argument("--dry-run", action="store_true", help="print what would be removed; remove nothing")
    p.set_defaults(handler=run_prune)


def run_check_index(args, reporter: Reporter) -> int:
    from builder.config.cascade import Setting, resolve
    from builder.config.environment import user_versions_file, versions_overlay
    from builder.toolchains.index_check import lacking, rows_text, write_overlay
    from builder.toolchains.package_index import PackageIndex
    from builder.toolchains.versions import SOURCE, read_table

    index = resolve(flag=("--index", args.index), env=("KBUILD_TORCH_INDEX", builder_settings().torch_index))
    assert index is not None  # the environment's torch_index is PyPI when KBUILD_TORCH_INDEX is unset
    user = user_versions_file()  # where --write makes the overlay when none is set
    overlay = versions_overlay() or Setting(user, f"{user} (kbuild's config folder)")
    table = read_table(overlay=overlay if overlay.value.exists() else None)  # --write may make it
    found = lacking(PackageIndex(index.value), table)
    if args.json:
        reporter.result(json.dumps({"index": index.value, "lacking": [asdict(f) for f in found],
                                    "rows": rows_text(found, table), "overlay": str(overlay.value)}, indent=2))
    tables = SOURCE + (f" + {table.overlay.value}" if table.overlay else "")
    if not found:
        if not args.json:
            reporter.result(f"{tables} has every torch release of {index.value} (from torch "
                            f"{min(table.data['torch'], key=_series)} on)")
        return 0
    if not args.json:
        for f in found:
            reporter.result(f"the table lacks {f.describe()}")
    named = overlay.origin if overlay.origin.startswith(str(overlay.value)) else f"{overlay.value} ({overlay.origin})"
    if args.write:
        write_overlay(overlay.value, found, table, overlay.origin)
        reporter.result(f"wrote {len(found)} torch row(s) to {named}; kbuild variants "
                        "shows where each row came from")
        return 0
    if not args.json:
        reporter.result(f"add to {named}, or run again with --write:\n"
                        f"{rows_text(found, table).rstrip()}")
    return 1


def _series(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split("."))


def run_list(args, reporter: Reporter) -> int:
    from builder.backends.cuda_toolkit import find_cuda
    from builder.report import human_size

    store = open_store()
    records = store.list()
    try:
        cuda = find_cuda(None)
    except KbuildError:  # no system CUDA: the listing says nothing of it
        cuda = None
    if args.json:
        system = {"home": cuda.home, "nvcc": cuda.nvcc, "version": "{}.{}".format(*cuda.version)} if cuda else None
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
    from builder.toolchains.spec import install, parse_spec
    from builder.toolchains.versions import load_versions_table

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
