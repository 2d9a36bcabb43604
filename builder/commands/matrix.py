"""`kbuild matrix`: the workspace's matrix as CI slices, and the check that a version branch holds
all of it.

    kbuild matrix . --slices 4              # a table: each slice's variants and estimated cost
    kbuild matrix . --slices 4 --github     # {"include": [{"slice": 1, "variants": "…"}, …]} for a job matrix
    kbuild matrix . --check --hub URL       # every kernel's branch holds the whole matrix, every
                                            # variant verifies, and this machine's one loads

Each CI job of a fan-out runs `kbuild build . --variant <each of its slice>` and `kbuild publish .
--variant …`; the last job runs `--check`.
"""

from __future__ import annotations

import json

from builder.errors import KbuildError, UsageError
from builder.project.manifest import load_manifest
from builder.plan.matrix import select
from builder.plan.slices import costs, plan_slices
from builder.project.workspace import kernel_dirs, workspace_matrix

DIR_HELP = "a kernel folder, or a workspace whose build.toml lists members (default: .)"


def add_parser(subparsers) -> None:
    from pathlib import Path

    p = subparsers.add_parser("matrix", help="cut the matrix into CI slices (--slices N [--github]), or check that a "
                                             "version branch holds all of it (--check)")
    p.add_argument("dir", nargs="?", type=Path, default=Path("."), help=DIR_HELP)
    p.add_argument("--slices", type=int, default=1, metavar="N", help="how many CI jobs to split the matrix into "
                   "(balanced by estimated compile time; default 1)")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--github", action="store_true",
                     help="print a GitHub Actions job matrix (JSON: include = one entry per slice)")
    out.add_argument("--json", action="store_true", help="print the slices as JSON")
    out.add_argument("--check", action="store_true", help="check each kernel's version branch on the hub: the "
                     "whole matrix is there, every variant verifies, and the one this machine fits loads")
    p.add_argument("--hub", default=None, help="with --check: a folder/file:// (local hub) or http(s):// URL "
                   "(default: $KBUILD_HUB, else $HF_ENDPOINT, else ~/.cache/kbuild/hub)")
    p.add_argument("--branch", default=None, help="with --check: the branch (default: [general.hub] branch, else "
                   "v<version>)")
    p.set_defaults(handler=_matrix)


def _matrix(args, reporter) -> int:
    if args.slices < 1:
        raise UsageError(f"--slices: expected a positive number, got {args.slices}")
    if not args.dir.is_dir():
        raise UsageError(f"{args.dir}: not a folder", hint="pass a kernel project folder (with build.toml)")
    folder = args.dir.resolve()
    choice, where = workspace_matrix(folder)
    matrix = select(choice, where)
    kernels = [load_manifest(d) for d in kernel_dirs(folder)]
    per_variant = costs(kernels, matrix)
    if args.check:
        return _check(kernels, per_variant, args, reporter)
    slices = plan_slices(per_variant, args.slices) if per_variant else []
    if args.github:
        entries = [{"slice": i, "variants": " ".join(s.variants), "kernels": " ".join(s.kernels),
                    "estimate": s.estimate} for i, s in enumerate(slices, 1)]
        reporter.result(json.dumps({"include": entries}, separators=(",", ":")))
        return 0
    if args.json:
        reporter.result(json.dumps([{"slice": i, "variants": list(s.variants), "kernels": list(s.kernels),
                                     "estimate": s.estimate} for i, s in enumerate(slices, 1)], indent=2))
        return 0
    if len(slices) < args.slices:
        reporter.info(f"{len(per_variant)} variant name(s) in the matrix: {len(slices)} slice(s), not {args.slices}")
    for i, s in enumerate(slices, 1):
        reporter.result(f"slice {i}: estimate {s.estimate:g} ({', '.join(s.kernels)})")
        for name in s.variants:
            reporter.result(f"  {name}")
    return 0


def _check(kernels, per_variant, args, reporter) -> int:
    """Each kernel's branch: every matrix variant present and verified (digests), then loaded."""
    from kbuild.errors import KernelError
    from kbuild.hub_loader import Session
    from kbuild.refs import KernelRef
    from kbuild.settings import from_environment
    from kbuild.variants import detect_system

    settings = from_environment()  # the one hub rule, shared with publish and get_kernel
    session = Session(args.hub or settings.hub, settings)
    problems = 0
    for m in kernels:
        if not m.hub_repo_id:
            raise UsageError(f"{m.path}: [general.hub] repo-id is not set: --check needs the repo of each kernel")
        branch = args.branch or m.hub_branch or (f"v{m.version}" if m.version is not None else None)
        if branch is None:
            raise UsageError(f"{m.path}: no [general] version and no [general.hub] branch: pass --branch")
        expected = sorted(name for name, by_kernel in per_variant.items() if m.name in by_kernel)
        try:
            ref = KernelRef(m.hub_repo_id, branch)
            commit = session.commit(ref)
            held = set(session.reader.variants(m.hub_repo_id, commit))
        except KernelError as e:
            raise KbuildError(f"{m.hub_repo_id}@{branch}: {e}") from None
        missing = [name for name in expected if name not in held]
        where = f"{m.hub_repo_id}@{branch} ({commit[:12]})"
        for name in missing:
            reporter.result(f"missing   {where} {name}")
        problems += len(missing)
        for name in (n for n in expected if n in held):
            try:
                session.install(m.hub_repo_id, commit, name)  # fetched and checked against its digests
                reporter.result(f"verified  {where} {name}")
            except (KernelError, OSError) as e:  # OSError: the cache's disk (full, read-only)
                reporter.result(f"corrupt   {where} {name}: {e}")
                problems += 1
        if missing:
            continue
        try:
            found = session.resolve(KernelRef(m.hub_repo_id, commit), detect_system())
            module = session.load_best(found)
            reporter.result(f"loaded    {where} {found.chosen} as {module.__name__}")
        except (KernelError, OSError, ImportError) as e:  # ImportError: the kernel's own import failed
            reporter.result(f"unloadable {where}: {e}")
            problems += 1
    if problems:
        reporter.error(f"{problems} problem(s): the branch does not hold the whole matrix in a usable state")
        return 1
    reporter.info(f"every variant of the matrix is published and verifies ({len(kernels)} kernel(s))")
    return 0
