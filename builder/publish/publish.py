"""`kbuild publish`: put built variants on a version branch of a hub repo, and the card on main.

Only the published variants' folders, their signatures' folders and their layer checks change (their
stale files are deleted); every other variant on the branch stays, so CI jobs can publish slices in parallel. A
version branch never breaks its users: a slice that would drop a public name is refused unless forced.
"""

from __future__ import annotations

import io
import json
import random
import re
import tempfile
import time
import zipfile
from dataclasses import dataclass, field, replace
from pathlib import Path

from builder.hub.backend import HubBackend, RemoteFile, Upload
from builder.layout import BENCH_DIR, BUILD_DIR, PUBLISHED_BENCH_DIR, WORK_DIR
from builder.project.gitid import source_id, stale_reason
from builder.project.manifest import Manifest
from builder.publish.card import render_card
from builder.publish.integrity import regular_files, verify_variant
from builder.publish.layer_checks import with_layer_checks
from builder.publish.pyapi import public_names
from builder.publish.signing import SIGNATURE, sign_metadata
from builder.stage.variant_folder import SKIPPED_SECTIONS
from kbuild.digest import git_blob_oid
from kbuild.metadata import PARTIAL_ARCHS
from kbuild.repo_layout import (
    BUILD,
    LAYER_CHECKS,
    SIGNATURES,
    folder_variant,
    layer_check,
    owned_prefixes,
    owns,
    repo_path,
)
from kbuild_common.errors import ExitCode, KbuildError, UsageError
from kbuild_hub.errors import HubError, RefConflict

BRANCH_RE = re.compile(r"^v(\d+)\Z")
# Parallel CI jobs publish slices of one branch: each lost compare-and-swap means planning again.
# Jittered exponential backoff spreads the retries (16 publishers settle within a few seconds);
# the cap bounds a pathological run at about a minute.
ATTEMPTS = 25
BACKOFF_S, BACKOFF_CAP_S = 0.05, 3.0


def backoff(attempt: int) -> None:
    time.sleep(min(BACKOFF_CAP_S, BACKOFF_S * 2 ** attempt) * random.uniform(0.5, 1.5))


class PublishError(KbuildError):
    exit_code = ExitCode.REFUSED


@dataclass(frozen=True)
class PublishOptions:
    folder: Path
    repo_id: str | None = None
    branch: str | None = None
    variants: tuple[str, ...] = ()
    allow_dirty: bool = False
    force: bool = False
    dry_run: bool = False
    allow_partial_archs: bool = False
    with_bench: bool = False  # attach `kbuild bench`'s latest results (benchmarks/results/)
    sign_key: object = None  # a Setting[Path]: sign each variant's metadata.json with this SSH key (signing.py)


@dataclass(frozen=True)
class LocalVariant:
    name: str
    path: Path
    metadata: dict
    verified: dict[str, Path] = field(default_factory=dict, repr=False)  # relative path -> file, digest checked
    layer_check: Path | None = None  # its `kbuild check-layers` record, of this build (layer_checks.py)

    def files(self) -> dict[str, Path]:
        """Repo path -> local file: the regular files checked against the variant's digest, its SSH
        signature and its layer check (kbuild/repo_layout.py: both outside build/<variant>/)."""
        files = {repo_path(self.name, rel): path for rel, path in self.verified.items()}
        if self.layer_check is not None:
            files[layer_check(self.name)] = self.layer_check
        return files


@dataclass(frozen=True)
class PublishPlan:
    repo_id: str
    branch: str
    parent: str | None
    variants: tuple[str, ...]
    added: tuple[str, ...] = ()
    replaced: tuple[str, ...] = ()
    deleted: tuple[str, ...] = ()
    unchanged: int = 0
    uploads: tuple[Upload, ...] = field(default=(), repr=False)
    layer_checks: tuple[str, ...] = ()  # the variants published with their layer check

    @property
    def empty(self) -> bool:
        return not (self.added or self.replaced or self.deleted)

    def summary(self) -> dict:
        return {"repo_id": self.repo_id, "branch": self.branch, "parent": self.parent,
                "variants": list(self.variants), "added": list(self.added), "replaced": list(self.replaced),
                "deleted": list(self.deleted), "unchanged": self.unchanged,
                "layer_checks": list(self.layer_checks)}


@dataclass(frozen=True)
class PublishResult:
    plan: PublishPlan
    commit: str | None
    url: str | None
    card_commit: str | None = None

    def summary(self) -> dict:
        return {**self.plan.summary(), "commit": self.commit, "url": self.url, "card_commit": self.card_commit}


# -- what to publish -----------------------------------------------------------------------------

def local_variants(manifest: Manifest, only: tuple[str, ...]) -> list[LocalVariant]:
    build = manifest.root / BUILD_DIR
    found = {p.name: p for p in sorted(build.iterdir())
             if p.is_dir() and not p.name.startswith(".")} if build.is_dir() else {}
    for name in only:
        if name not in found:
            raise UsageError(f"--variant {name}: not built in {build} (built: {', '.join(found) or 'none'})",
                             hint=f"run kbuild build {manifest.root}")
    chosen = [found[n] for n in (only or found)]
    if not chosen:
        # refused like a stale build (7), not a bad argument (2): the command was right, the folder is not ready
        raise PublishError(f"{build}: nothing built to publish", hint=f"run kbuild build {manifest.root}")
    variants = []
    for path in chosen:
        meta_path = path / "metadata.json"
        try:
            metadata = json.loads(meta_path.read_text())
        except (OSError, ValueError) as e:
            raise PublishError(f"{meta_path}: unreadable metadata ({e})") from None
        variants.append(LocalVariant(path.name, path, metadata, verify_variant(path, metadata)))
    return variants


def check_publishable(variants: list[LocalVariant], allow_dirty: bool,
                      allow_partial_archs: bool = False) -> int | None:
    """One version for the whole slice, clean provenance, every arch the kernel lists; returns
    that version (None for a kernel without [general] version: resolve_target then needs a branch)."""
    versions = {v.metadata.get("version") for v in variants}
    if len(versions) != 1:
        listing = ", ".join(f"{v.name}: {v.metadata.get('version')}" for v in variants)
        raise PublishError(f"variants of mixed versions cannot be published together ({listing})",
                           hint="rebuild them all from one source")
    sources = {v.name: ((v.metadata.get("provenance") or {}).get("kernel") or {}).get("tree") for v in variants}
    if len({t for t in sources.values() if t}) > 1:
        # e.g. a variant folder left in build/ by an older build: it would ship old code
        listing = ", ".join(f"{name}: {tree[:7]}" for name, tree in sources.items() if tree)
        raise PublishError(f"variants built from different sources cannot be published together ({listing})",
                           hint="rebuild the stale ones (kbuild build --all, or --variant), delete them, "
                                "or publish a slice with --variant")
    if not allow_partial_archs:
        for v in variants:
            backend = v.metadata.get("backend") or {}
            if backend.get(PARTIAL_ARCHS):
                left_out = backend.get(SKIPPED_SECTIONS)
                sections = "; ".join(f"[kernel.{name}] ({' '.join(map(str, archs))})" for name, archs in
                                     left_out.items()) if isinstance(left_out, dict) else ""
                raise PublishError(f"{v.name} was built for CUDA archs {' '.join(backend.get('archs', []))} only "
                                   "(--cuda-archs), not every arch the kernel lists"
                                   + (f", without the sections {sections} and their ops" if sections else ""),
                                   hint="rebuild without --cuda-archs (and TORCH_CUDA_ARCH_LIST unset), "
                                        "or pass --allow-partial-archs")
    if not allow_dirty:
        for v in variants:
            kernel = (v.metadata.get("provenance") or {}).get("kernel")
            if kernel is None or kernel.get("dirty"):
                why = "was built outside a git checkout" if kernel is None else "was built from uncommitted changes"
                raise PublishError(f"{v.name} {why}; its source cannot be identified",
                                   hint="commit and rebuild, or pass --allow-dirty")
    return versions.pop()


def check_current(manifest: Manifest, variants: list[LocalVariant]) -> None:
    """Each variant is a build of the kernel folder as it is now: an edit or a commit since the
    build would otherwise publish old code under the new sources' name."""
    now = source_id(manifest.root)
    for v in variants:
        why = stale_reason(v.metadata, now)
        if why:
            # with uncommitted changes a rebuild alone would only meet the dirty check next: say both
            todo = "commit the changes, then rebuild" if now.dirty else "rebuild"
            raise PublishError(f"{v.name} {why}: publishing it would ship a stale build",
                               hint=f"{todo} (kbuild build {manifest.root}), or pass --allow-dirty")


def resolve_target(manifest: Manifest, options: PublishOptions, version: int | None) -> tuple[str, str]:
    repo_id = options.repo_id or manifest.hub_repo_id
    if not repo_id:
        raise UsageError(f"{manifest.path}: no repo id: pass --repo-id ORG/NAME or set [general.hub] repo-id")
    if options.branch:
        branch = options.branch  # explicit: any branch name, on purpose
        m = BRANCH_RE.match(branch)
        if m and version is not None and int(m[1]) != version and not options.force:
            raise PublishError(f"--branch {branch} does not match [general] version = {version}",
                               hint=f"publish to v{version}, bump the version, or pass --force")
        return repo_id, branch
    branch = manifest.hub_branch or (f"v{version}" if version is not None else "")
    if not branch:
        raise UsageError(f"{manifest.path}: no version: set [general] version or pass --branch vN")
    if not BRANCH_RE.match(branch):
        raise PublishError(f"{manifest.where('general', 'hub', 'branch')}: branch {branch!r} is not v<N>",
                           hint="version branches are v1, v2, …; pass --branch to publish elsewhere on purpose")
    return repo_id, branch


# -- the plan (pure) -----------------------------------------------------------------------------

def plan_publish(repo_id: str, branch: str, parent: str | None, variants: list[LocalVariant],
                 extra: dict[str, Path], remote: dict[str, RemoteFile]) -> PublishPlan:
    """Compare the local files of the slice (plus `extra`, e.g. benchmarks/) with the branch."""
    local = {path: src for v in variants for path, src in v.files().items()}
    local.update(extra)
    added, replaced, uploads, unchanged = [], [], [], 0
    for path, src in sorted(local.items()):
        old = remote.get(path)
        if old is None:
            added.append(path)
        elif old.oid != git_blob_oid(src):
            replaced.append(path)
        else:
            unchanged += 1
            continue
        uploads.append(Upload(path, src))
    # a variant's folder, its signature's and its layer check: a stale signature (an unsigned republish)
    # or one left in build/<variant>/ by an older kbuild, or an older build's layer check, is deleted with
    # the variant's other stale files
    owned = (*(p for v in variants for p in owned_prefixes(v.name)), *{f"{p.split('/')[0]}/" for p in extra})
    deleted = sorted(p for p in remote if owns(owned, p) and p not in local)
    return PublishPlan(repo_id, branch, parent, tuple(v.name for v in variants), tuple(added), tuple(replaced),
                       tuple(deleted), unchanged, tuple(uploads),
                       tuple(v.name for v in variants if v.layer_check is not None))


def breaking_changes(local: dict[str, set[str] | None], remote: dict[str, set[str] | None]) -> list[str]:
    """Public names the slice would take away from the branch's users."""
    problems = []
    offered = set().union(*(names for names in remote.values() if names))
    for variant, names in sorted(local.items()):
        if names is None:
            continue
        lost = offered - names
        if lost:
            problems.append(f"{variant} lacks {', '.join(sorted(lost))}, which the branch already offers")
    return problems


# -- doing it ------------------------------------------------------------------------------------

def publish(manifest: Manifest, options: PublishOptions, hub: HubBackend, reporter) -> PublishResult:
    variants = local_variants(manifest, options.variants)
    version = check_publishable(variants, options.allow_dirty, options.allow_partial_archs)
    if not options.allow_dirty:
        check_current(manifest, variants)
    repo_id, branch = resolve_target(manifest, options, version)
    extra = _benchmarks(manifest, options.with_bench)
    with tempfile.TemporaryDirectory(prefix="kbuild-publish-") as scratch:
        variants = with_layer_checks(manifest.root, variants, Path(scratch), reporter)
        if options.sign_key is not None:
            variants = _signed(variants, options.sign_key, Path(scratch), reporter)
        return _publish(manifest, options, hub, reporter, variants, repo_id, branch, extra)


def _signed(variants: list[LocalVariant], key, scratch: Path, reporter) -> list[LocalVariant]:
    """Each variant with `metadata.json.sig` over its metadata.json added to what it uploads (as
    signatures/<variant>/metadata.json.sig: LocalVariant.files)."""
    signed = [replace(v, verified={**v.verified, SIGNATURE: sign_metadata(v.path / "metadata.json", key, scratch,
                                                                          v.name)}) for v in variants]
    reporter.info(f"signed metadata.json of {', '.join(v.name for v in variants)} with {key.value} ({key.origin})")
    return signed


def _publish(manifest: Manifest, options: PublishOptions, hub: HubBackend, reporter, variants, repo_id, branch,
             extra) -> PublishResult:
    if not options.dry_run:
        hub.ensure_repo(repo_id)
    for attempt in range(1, ATTEMPTS + 1):
        plan = _plan(hub, repo_id, branch, variants, extra, options)
        if options.dry_run or plan.empty:
            return PublishResult(plan, plan.parent, hub.url(repo_id, branch) if plan.parent else None)
        message = f"Publish {', '.join(plan.variants)} of {manifest.name} with kbuild"
        try:
            commit = hub.commit(repo_id, branch, uploads=list(plan.uploads), deletes=list(plan.deleted),
                                message=message, parent=plan.parent)
        except RefConflict:
            reporter.info(f"{branch} moved while publishing (attempt {attempt}/{ATTEMPTS}); planning again")
            backoff(attempt)
            continue
        card = _publish_card(manifest, hub, repo_id, branch, variants)
        return PublishResult(plan, commit, hub.url(repo_id, commit), card)
    raise PublishError(f"{repo_id}@{branch} kept moving: gave up after {ATTEMPTS} attempts")


def _plan(hub: HubBackend, repo_id, branch, variants, extra, options) -> PublishPlan:
    parent = _head(hub, repo_id, branch, options.dry_run)
    remote = {}
    if parent:
        remote = hub.files(repo_id, parent, BUILD)
        remote.update(hub.files(repo_id, parent, SIGNATURES))
        remote.update(hub.files(repo_id, parent, LAYER_CHECKS))
        remote.update(hub.files(repo_id, parent, "benchmarks"))
    plan = plan_publish(repo_id, branch, parent, variants, extra, remote)
    if parent and not options.force:
        problems = breaking_changes(_local_names(variants), _remote_names(hub, repo_id, parent, remote))
        if problems:
            raise PublishError(f"{repo_id}@{branch}: this would break the branch's users: {'; '.join(problems)}",
                               hint="publish the change to a new major branch, or pass --force")
    return plan


def _head(hub, repo_id, branch, dry_run) -> str | None:
    try:
        return hub.head(repo_id, branch)
    except KbuildError:
        if dry_run:  # a dry run against a repo that does not exist yet: everything is new
            return None
        raise


def _local_names(variants: list[LocalVariant]) -> dict[str, set[str] | None]:
    names = {}
    for v in variants:
        init = _init_file(v.path)
        archives = sorted(v.path.glob("*.zip"))  # the zip layout: the package in <id>.zip
        text = init.read_text() if init else _zip_init(archives[0].read_bytes()) if len(archives) == 1 else None
        names[v.name] = public_names(text) if text is not None else None
    return names


def _zip_init(archive: bytes) -> str | None:
    """The `__init__.py` at the root of a zip layout's archive, or None when it has none."""
    try:
        with zipfile.ZipFile(io.BytesIO(archive)) as z:
            return z.read("__init__.py").decode("utf-8", "replace")
    except (zipfile.BadZipFile, KeyError):
        return None


def _init_file(variant: Path) -> Path | None:
    direct = variant / "__init__.py"
    if direct.is_file():
        return direct
    return next(iter(sorted(variant.glob("*/__init__.py"))), None)


def _remote_names(hub, repo_id, commit, remote: dict[str, RemoteFile]) -> dict[str, set[str] | None]:
    names = {}
    for path in remote:
        variant = folder_variant(path)
        if variant is None or path.count("/") != 2:  # a file at the top of a variant's folder
            continue
        if path == repo_path(variant, "__init__.py"):
            names[variant] = public_names(hub.read(repo_id, commit, path).decode("utf-8", "replace"))
        elif path.endswith(".zip"):
            text = _zip_init(hub.read(repo_id, commit, path))
            names[variant] = public_names(text) if text is not None else None
    return names


def _benchmarks(manifest: Manifest, with_results: bool = False) -> dict[str, Path]:
    """benchmarks/ as it is, and with `with_results` the latest `kbuild bench` results beside it
    (a publish without them leaves none on the branch: they would describe older builds)."""
    folder = manifest.root / "benchmarks"
    files = {f"benchmarks/{rel}": path for rel, path in regular_files(folder).items()} if folder.is_dir() else {}
    if with_results:
        latest = manifest.root / BENCH_DIR
        found = {name: latest / name for name in ("results.json", "results.svg") if (latest / name).is_file()}
        if "results.json" not in found:
            raise PublishError(f"{manifest.root}: --with-bench: no results in {latest}",
                               hint=f"run kbuild bench {manifest.root} first")
        files.update({f"{PUBLISHED_BENCH_DIR}/{name}": path for name, path in found.items()})
    return files


def _publish_card(manifest, hub: HubBackend, repo_id, branch, variants) -> str | None:
    """README.md on main; only committed when its text changed."""
    text = render_card(manifest, repo_id, branch, variants).encode()
    head = hub.head(repo_id, "main")
    if head:
        try:
            if hub.read(repo_id, head, "README.md") == text:
                return None
        except HubError:
            pass  # no card yet
    card = manifest.root / WORK_DIR / "README.md"
    card.parent.mkdir(parents=True, exist_ok=True)
    card.write_bytes(text)
    for attempt in range(1, ATTEMPTS + 1):
        try:
            return hub.commit(repo_id, "main", uploads=[Upload("README.md", card)], deletes=[],
                              message=f"Card for {manifest.name} {branch}", parent=hub.head(repo_id, "main"))
        except RefConflict:
            backoff(attempt)
    raise PublishError(f"{repo_id}@main kept moving while writing the card")
