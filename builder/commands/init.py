"""`kbuild init NAME`: a new kernel project that builds, tests and publishes as generated."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from builder.report import Reporter


def add_parser(sub) -> None:
    p = sub.add_parser("init", help="create a kernel project that builds, tests and publishes as generated")
    p.add_argument("name", help="the kernel's name, e.g. fused-scale (its Python package: fused_scale)")
    p.add_argument("--dir", type=Path, default=None, help="the new project's folder (default: ./NAME)")
    p.add_argument("--backends", default="cpu,cuda", metavar="LIST",
                   help="cpu, cuda (compiled, torch's stable ABI) or triton (Python-only); default cpu,cuda")
    p.add_argument("--org", default="me", help="the hub organisation of [general.hub] repo-id (default: me)")
    p.add_argument("--in-repo", action="store_true",
                   help="allow a folder inside another git repository (a workspace member); by default the "
                        "project is a git repository of its own")
    p.set_defaults(handler=run)


def run(args, reporter: Reporter) -> int:
    from builder.project.scaffold import parse_backends, scaffold

    dest = (args.dir or Path(args.name)).absolute()
    files = scaffold(dest, args.name, parse_backends(args.backends), org=args.org, in_repo=args.in_repo)
    for path in files:
        reporter.info(f"created {path.relative_to(dest.parent)}")
    shown = os.path.relpath(dest) if dest.is_relative_to(Path.cwd()) else str(dest)
    reporter.result(f"{dest}: kernel {args.name} ({args.backends}); next: cd {shown}, commit it "
                    "(git add -A && git commit), then kbuild build . && kbuild test . && kbuild publish .")
    return 0
