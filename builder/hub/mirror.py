"""`kbuild hub mirror`'s work, under its parser in builder/commands/hub.py: the requests gathered
(mirror_requests.py, transformers_kernels.py) fetched through kbuild_hub.upstream.mirror into the
hub folder's upstream cache and shown by mirror_view.py (docs/upstream.md, "Mirroring for
air-gapped sites")."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from builder.hub.mirror_requests import parse_repo, read_lock
from builder.hub.mirror_view import MirrorView, Totals
from builder.hub.transformers_kernels import read
from kbuild_common.errors import ExitCode, UsageError
from kbuild_common.notices import trace
from kbuild_hub.errors import HubError
from kbuild_hub.gitstore import GitStore
from kbuild_hub.upstream.cache import UpstreamCache
from kbuild_hub.upstream.client import UpstreamClient
from kbuild_hub.upstream.mirror import Failure, Mirror, Request, Tally, Target


def requests_for(repos: list[str], repo_type: str, locks: list[Path], transformers_python: str | None,
                 reporter) -> list:
    """What to mirror: REPO[@REV] arguments, the kernels lock files pin, and the kernel repos the
    transformers of `transformers_python` maps by default; each (type, repo, revision) once."""
    requests = [parse_repo(text, repo_type) for text in repos]
    for lock in locks:
        requests += read_lock(lock)
    if transformers_python is not None:
        requests += _transformers_requests(transformers_python, reporter)
    return _unique(requests)


def mirror(url: str, token: str | None, root: Path, requests, variants: set[str] | None, reporter,
           signatures=None) -> int:
    """Mirror every request into `root`'s upstream cache; the exit code (1 when anything failed,
    each failure one line). `signatures`: the signature rules a variant must also pass (the
    runtime's SignatureSettings, as the server applies them)."""
    root.mkdir(parents=True, exist_ok=True)
    # the signature rules the server applies (kbuild_hub/server build_app): the same cache, the same checks
    cache = UpstreamCache(root, UpstreamClient(url, token), signatures, trace)
    try:
        return _mirror_all(Mirror(cache), root, requests, variants, reporter)
    finally:
        cache.close()


def _mirror_all(work, root: Path, requests, variants: set[str] | None, reporter) -> int:
    targets, failures = _resolve(work, requests)
    _check_variants(variants, targets, failures, reporter)
    _warn_hidden(root, targets, reporter)
    totals = Totals()
    with MirrorView(reporter) as view:
        for target in targets:
            tally, before = _mirror_target(work, target, variants, view)
            totals.add(target, tally, before)
            failures += tally.failures
    totals.failures = len(failures)
    for failure in failures:
        reporter.error(failure.line())
    view.summary(root, totals)
    return ExitCode.FAILED if failures else ExitCode.OK


def _resolve(work, requests) -> tuple[list, list]:
    """Each request's commit and tree (the upstream asked), each commit once: @v1 and the sha it
    points at are one target. A request that cannot be resolved is a failure, the others go on."""
    targets: dict[tuple[str, str, str], Target] = {}
    failures: list[Failure] = []
    for request in requests:
        try:
            target = work.resolve(request)
        except HubError as e:
            failures.append(Failure(request.label, str(e)))
            continue
        key = (target.snap.repo_type, target.snap.repo_id, target.snap.commit)
        if key in targets:
            targets[key].request = _merged(targets[key].request, request)
        else:
            targets[key] = target
    return list(targets.values()), failures


def _mirror_target(work, target, variants, view):
    """Fetch what the cache lacks of one target; its tally and how many of its variants were
    verified before this run."""
    tally = Tally()
    items = work.items(target, variants)
    cached = [i for i in items if work.cached(target, i)]
    missing = [i for i in items if i not in cached]
    view.start(target, missing, cached)
    for item in cached:
        tally.files_cached += item.files
        tally.bytes_cached += item.size
        if item.variant is not None:  # verified before: the cache answers how from disk, fetching nothing
            tally.verified[item.variant] = work.fetch(target, item)
    before = len(tally.verified)
    for item in missing:
        try:
            how = work.fetch(target, item, view.advance)
        except (HubError, OSError) as e:
            why = f"{item.path}: {e}" if item.variant is None else str(e)  # a variant's error names it
            tally.failures.append(Failure(target.failure_label, why))
            continue
        tally.files_fetched += item.files
        tally.bytes_fetched += item.size
        if how is not None:
            tally.verified[item.variant] = how
        view.item_done(target, item, how)
    tally.failures += [Failure(target.failure_label, why) for why in work.lock_mismatches(target, variants)]
    view.done(target, tally)
    return tally, before


def _check_variants(variants, targets, failures, reporter) -> None:
    """Every --variant must be a variant of some kernel mirrored: a typo would mirror nothing of it."""
    if not variants:
        return
    kernels = [t for t in targets if t.snap.repo_type == "kernel"]
    if not kernels:  # none could be resolved: their failures say why, not a variant check
        return
    have = sorted({v for t in kernels for v in t.variants()})
    unknown = sorted(variants - set(have))
    if unknown:
        for failure in failures:  # said first: a repo that failed may be the one that has it
            reporter.error(failure.line())
        raise UsageError(f"--variant: {', '.join(unknown)} is in none of the kernel repos mirrored "
                         f"({', '.join(t.label for t in kernels)}); they have: {', '.join(have) or 'no variants'}")


def _warn_hidden(root: Path, targets, reporter) -> None:
    """Mirrored repos the hub folder's own repos keep `kbuild hub serve` from serving (its rule
    against dependency confusion, docs/upstream.md "No dependency confusion"), said before the
    fetch rather than found out on the offline site."""
    store = GitStore(root)
    local = store.list_repos()
    orgs = {repo_id.split("/")[0] for _, repo_id in local}
    for target in targets:
        kind, repo_id = target.snap.repo_type, target.snap.repo_id
        org = repo_id.split("/")[0]
        if (kind, repo_id) in local:
            reporter.warn(f"{repo_id}: {root} holds a {kind} repo of that name, which `kbuild hub serve` serves "
                          "instead of the mirrored one")
        elif org in orgs:
            reporter.warn(f"{repo_id}: organisation {org} has repos in {root}, so `kbuild hub serve` serves none of "
                          f"its other names from the mirror unless started with --upstream-org {org}")


def _transformers_requests(python: str, reporter) -> list:
    mapping = read(python)
    reporter.info(f"transformers {mapping['transformers']} ({mapping['python']}) maps "
                  f"{len(mapping['kernels'])} kernel repo revision(s) by default")
    for skipped in mapping.get("skipped") or []:
        reporter.warn(f"--transformers: not mirrored, no single revision: {skipped}")
    return [Request("kernel", k["repo_id"], k["revision"], f"transformers: {', '.join(k['uses'])}")
            for k in mapping["kernels"]]


def _unique(requests: list) -> list:
    """Each (type, repo, revision) once; what lock files record of one is kept together."""
    kept: dict = {}
    for r in requests:
        key = (r.repo_type, r.repo_id, r.revision)
        kept[key] = _merged(kept[key], r) if key in kept else r
    return list(kept.values())


def _merged(first, other):
    """`first`, also carrying the locked variants `other` records."""
    return replace(first, locked=tuple(sorted(set(first.locked) | set(other.locked))))
