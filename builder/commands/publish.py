"""`kbuild publish [DIR]`: push built variants to a version branch of a hub repo; a workspace's
members each to their own (builder/publish/members.py)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from builder.commands.arguments import add_dir, add_hub, folder
from builder.config.environment import from_environment as builder_settings
from kbuild_common.errors import UsageError

if TYPE_CHECKING:
    from builder.publish.publish import PublishResult
    from builder.report import Reporter


def add_parser(sub) -> None:
    p = sub.add_parser("publish", help="push built variants to a version branch of a hub repo")
    add_dir(p)
    p.add_argument("--repo-id", help="ORG/NAME (default: [general.hub] repo-id)")
    p.add_argument("--branch", help="target branch (default: [general.hub] branch, else v<version>)")
    p.add_argument("--variant", action="append", default=[], metavar="V", help="only this variant (repeatable)")
    add_hub(p)
    p.add_argument("--allow-dirty", action="store_true",
                   help="publish builds of uncommitted sources, or of sources changed since the build")
    p.add_argument("--force", action="store_true", help="allow removing public names from the branch")
    p.add_argument("--allow-partial-archs", action="store_true",
                   help="publish variants built for fewer CUDA archs than the kernel lists (--cuda-archs)")
    p.add_argument("--with-bench", action="store_true",
                   help="attach kbuild bench's latest results (.kbuild/bench/) as benchmarks/results/ on the branch")
    p.add_argument("--sign", action="store_true",
                   help="sign each variant's metadata.json with an SSH key (uploaded as "
                        "signatures/<variant>/metadata.json.sig)")
    p.add_argument("--sign-key", default=None, metavar="KEY_FILE",
                   help="the SSH key --sign uses (default: KBUILD_SIGNING_KEY, else the signatures file's sign-key)")
    p.add_argument("--dry-run", action="store_true", help="print the plan; write nothing")
    p.add_argument("--json", action="store_true", help="print a machine-readable summary")
    p.set_defaults(handler=run)


def run(args, reporter: Reporter) -> int:
    from builder.hub.open import open_hub
    from builder.publish.members import publish_members
    from builder.publish.publish import PublishOptions

    settings = builder_settings()
    if args.sign_key is not None and not args.sign:
        raise UsageError("--sign-key: given without --sign; add --sign to sign the published variants")
    options = PublishOptions(folder=folder(args.dir).resolve(), repo_id=args.repo_id, branch=args.branch,
                             variants=tuple(args.variant), allow_dirty=args.allow_dirty, force=args.force,
                             dry_run=args.dry_run, allow_partial_archs=args.allow_partial_archs,
                             with_bench=args.with_bench,
                             sign_key=settings.signing_key_setting(args.sign_key) if args.sign else None)
    # the hub rule get_kernel and kbuild lock follow too, parsed once
    hub = open_hub(settings.hub_address(args.hub), settings.token)
    summaries, refused, kernels = [], {}, 0
    for member in publish_members(options, hub, reporter):
        kernels += 1
        if member.unbuilt:
            reporter.info(f"{member.name}: none of {', '.join(args.variant)} is built here; not published")
        elif member.error is not None:
            reporter.failure(member.error, prefix=f"{member.name}: not published: ")
            refused[member.name] = member.error
            summaries.append({"kernel": member.name, "error": str(member.error)})
        else:
            assert member.result is not None  # a member neither left alone nor refused was published
            summaries.append(member.result.summary())
            if not args.json:
                _render(member.result, hub, args.dry_run, reporter)
    if args.json:
        reporter.result(json.dumps(summaries[0] if kernels == 1 else summaries, indent=2))
    if refused:
        reporter.info(f"not published: {', '.join(refused)} ({len(refused)} of {kernels} kernels)")
        return next(iter(refused.values())).exit_code
    return 0


def _render(result: PublishResult, hub, dry_run: bool, reporter: Reporter) -> None:
    plan = result.plan
    target = f"{plan.repo_id}@{plan.branch}"
    counts = f"{len(plan.added)} added, {len(plan.replaced)} replaced, {len(plan.deleted)} deleted, " \
             f"{plan.unchanged} unchanged"
    if dry_run:
        reporter.result(f"dry run: {target} ({hub.describe()}), parent {plan.parent or '(new branch)'}: {counts}")
        for kind, paths in (("add", plan.added), ("replace", plan.replaced), ("delete", plan.deleted)):
            for path in paths:
                reporter.result(f"  {kind:8} {path}")
    elif plan.empty:
        reporter.result(f"{target} already has these files ({counts}); nothing to publish")
    else:
        reporter.result(f"published {', '.join(plan.variants)} to {target}: {counts}")
        if plan.layer_checks:
            reporter.result(f"with the layer checks of {', '.join(plan.layer_checks)} (layer-checks/)")
        reporter.result(f"commit {result.commit}")
        assert result.url is not None  # None only for a dry run or an empty plan (nothing committed)
        reporter.result(result.url)
