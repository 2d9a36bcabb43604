"""`kbuild hub mirror`: whole repos at given revisions fetched into a hub folder's upstream cache
(cache.py) through the same calls and the same verification `kbuild hub serve --upstream` uses,
so that the folder served offline answers what the upstream answered, commit ids included
(docs/upstream.md, "Mirroring for air-gapped sites").

The cache owns the layout on disk; this module only decides what to ask it for: the repo's refs
(clients list them to find vN), the revision's commit and tree, each kernel variant as a whole
(`ensure_variant`: `build/<variant>/` and its SSH signature in `signatures/<variant>/`, verified
against its metadata.json digest) and every other file
(`fetch_file`: verified against the upstream's listing). What is cached already is not fetched
again, so a mirror interrupted or rerun continues where it stopped.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

from kbuild.repo_layout import folder_variant, metadata_file, variant_folder, variant_of
from kbuild_hub.errors import HubError
from kbuild_hub.upstream.cache import Snapshot, UpstreamCache, file_size
from kbuild_hub.upstream.client import UpstreamMissing, UpstreamRefused

_VERSION_BRANCH = re.compile(r"v(\d+)")


@dataclass(frozen=True)
class Request:
    """One repo to mirror: at `revision` (a vN branch, another branch or tag, a full commit id),
    or, without one, the newest vN branch of a kernel and `main` of anything else."""

    repo_type: str
    repo_id: str
    revision: str | None = None
    origin: str = ""  # why it is mirrored, when not named on the command line: "kernels.lock", "transformers: …"
    locked: tuple[tuple[str, str], ...] = ()  # (variant, sha256 of its metadata.json) a kbuild lock file records

    @property
    def label(self) -> str:
        """What a line about it names: repo, revision and, when not on the command line, why it is mirrored."""
        revision = self.revision or ("(newest vN)" if self.repo_type == "kernel" else "main")
        return f"{self.repo_id}@{revision}" + (f" ({self.origin})" if self.origin else "")


@dataclass(frozen=True)
class Item:
    """One unit the cache fetches: a plain file, or a kernel variant (all its files, verified together)."""

    path: str  # the file, or the variant's folder `build/<variant>`
    variant: str | None
    files: int
    size: int


@dataclass
class Target:
    request: Request
    revision: str  # what the request resolved through (v3 for "newest"), for the lines the user reads
    snap: Snapshot

    @property
    def label(self) -> str:
        return f"{self.request.repo_id}@{self.revision}"

    @property
    def failure_label(self) -> str:
        return self.label + (f" ({self.request.origin})" if self.request.origin else "")

    def variants(self) -> list[str]:
        """The folders under build/ (kernel-builder's and kbuild's variants)."""
        return sorted({v for p in self.snap.entries if (v := folder_variant(p)) is not None})


@dataclass
class Failure:
    what: str  # repo@revision
    why: str

    def line(self) -> str:
        return f"{self.what}: {self.why}"


@dataclass
class Tally:
    """What one target's mirroring did."""

    files_fetched: int = 0
    files_cached: int = 0
    bytes_fetched: int = 0
    bytes_cached: int = 0
    verified: dict[str, str] = field(default_factory=dict)  # variant -> how (metadata.json digest …)
    failures: list[Failure] = field(default_factory=list)


class Mirror:
    def __init__(self, cache: UpstreamCache):
        self.cache = cache
        self._orgs_seen: set[str] = set()

    def resolve(self, request: Request) -> Target:
        """The commit and tree the request names, asked of the upstream (and recorded, so the
        offline hub resolves the same names); HubError naming what failed."""
        cache, kind, repo_id = self.cache, request.repo_type, request.repo_id
        self._org_card(repo_id.split("/")[0])
        listing, stale = cache.refs(kind, repo_id)  # kept: offline clients list refs to find vN
        if stale:
            raise HubError(stale)
        revision = request.revision or _default_revision(kind, listing)
        resolved = cache.resolve(kind, repo_id, revision)
        if resolved.stale:  # the cache's last answer, not the upstream's: not what a mirror is for
            raise HubError(resolved.stale)
        return Target(request, revision, cache.snapshot(kind, repo_id, resolved.commit))

    def items(self, target: Target, variants: set[str] | None) -> list[Item]:
        """What to fetch at the target: every file, but for a kernel only the named variants'
        folders under build/ (with their signatures under signatures/) when `variants` is given."""
        snap, files = target.snap, []
        by_variant: dict[str, tuple[int, int]] = {}  # a variant's file count and bytes
        for path, entry in sorted(snap.entries.items()):
            if entry.get("type") != "file":
                continue
            folder = variant_of(path)  # build/<variant>/… or its signature in signatures/<variant>/
            if folder is not None and variants is not None and snap.repo_type == "kernel" and folder not in variants:
                continue
            variant = snap.variant_of(path)
            if variant is None:
                files.append(Item(path, None, 1, file_size(entry)))
            else:
                count, size = by_variant.get(variant, (0, 0))
                by_variant[variant] = (count + 1, size + file_size(entry))
        return [*(Item(variant_folder(v), v, n, s) for v, (n, s) in sorted(by_variant.items())), *files]

    def cached(self, target: Target, item: Item) -> bool:
        """Whether the item is in the cache already, verified."""
        path = metadata_file(item.variant) if item.variant else item.path
        return self.cache.cached_path(target.snap, path) is not None

    def fetch(self, target: Target, item: Item, progress=lambda n: None) -> str | None:
        """Fetch one item into the cache; how a variant was verified (None for a plain file)."""
        if item.variant is not None:
            how = self.cache.ensure_variant(target.snap, item.variant)
            progress(item.size)  # fetched and verified as a whole: its bytes count once it is kept
            return how
        self.cache.fetch_file(target.snap, item.path, progress)
        return None

    def lock_mismatches(self, target: Target, variants: set[str] | None) -> list[str]:
        """The variants a kbuild lock file records whose metadata.json here is not the one it
        locked (sha256), or that the commit lacks: a lock pins content, not only a commit id."""
        wrong = []
        for variant, expected in target.request.locked:
            if variants is not None and variant not in variants:
                continue
            path = metadata_file(variant)
            if path not in target.snap.entries:
                wrong.append(f"{variant_folder(variant)}: locked, but not at commit {target.snap.commit[:12]}")
                continue
            copy = self.cache.cached_path(target.snap, path)
            if copy is None:  # not mirrored (refused or failed): said by its own failure
                continue
            actual = hashlib.sha256(copy.read_bytes()).hexdigest()
            if actual != expected:
                wrong.append(f"{variant_folder(variant)}: metadata.json does not match the lock file "
                             f"(locked {expected[:12]}, the upstream's {actual[:12]})")
        return wrong

    def _org_card(self, org: str) -> None:
        """The organisation card, once per organisation: the offline hub answers its trust flag as
        the upstream did. A card the upstream has not (404) or will not show this token is left out:
        the offline hub then answers as for an organisation without a card."""
        if org in self._orgs_seen:
            return
        self._orgs_seen.add(org)
        try:
            self.cache.org_overview(org)
        except (UpstreamMissing, UpstreamRefused):
            pass


def _default_revision(repo_type: str, listing: dict) -> str:
    """The newest vN branch of a kernel, `main` of a model or dataset."""
    if repo_type != "kernel":
        return "main"
    branches = [b.get("name", "") for b in listing.get("branches") or [] if isinstance(b, dict)]
    versions = [int(m.group(1)) for name in branches if (m := _VERSION_BRANCH.fullmatch(name))]
    if not versions:
        named = ", ".join(sorted(branches)) or "none"
        raise HubError(f"no version branch (v1, v2, …) to mirror; its branches: {named}; name a revision with REPO@REV")
    return f"v{max(versions)}"
