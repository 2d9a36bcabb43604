"""What the pages show, read from the hub's store: each kernel repo's versions (its `vN` branches),
the variants each offers with what their metadata.json records and their published `kbuild
check-layers` verdicts, the card on `main`, and the latest `kbuild bench` results a branch carries.
A commit never changes, so what is derived from one is kept in memory by its sha: a page costs the
refs and what is new since the last visit."""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
import threading
from dataclasses import dataclass, field

from kbuild.layer_check_record import MAX_BYTES, UnreadableRecord, read_record
from kbuild.metadata import VariantMetadata
from kbuild.repo_layout import BUILD, LAYER_CHECKS, layer_check, metadata_file, repo_path
from kbuild.variants import NOARCH, STABLE_ABI, parse_variant
from kbuild_hub.errors import HubError

KERNEL = "kernel"
_VERSION = re.compile(r"^v(\d+)$")
RESULTS = "benchmarks/results/results.json"  # kbuild publish --with-bench (builder/layout.py's PUBLISHED_BENCH_DIR)
RESULTS_PLOT = "benchmarks/results/results.svg"  # drawn beside RESULTS' table


@dataclass(frozen=True)
class Variant:
    name: str
    row: str  # "torch 2.14" or "stable ABI (torch >= 2.10)" or "any torch (Python only)"
    column: str  # "CUDA 13.0", "CPU", "Triton / CUDA", ...
    size: int  # bytes of its files
    files: tuple[tuple[str, int, str], ...]  # (path under the variant, size, the digest's sha256 in hex or "")
    archs: tuple[str, ...] = ()
    partial: bool = False
    floor: str = ""  # "manylinux_2_34_x86_64 (glibc 2.34, GLIBCXX 3.4.29)"
    provenance: dict = field(default_factory=dict)
    problem: str = ""  # its metadata.json could not be read
    layers_checked: str = ""  # its published layer check's verdict, or why it cannot be shown
    layers_differ: str = ""  # the first layer quantity that differs there
    layers_bad: bool = False  # something differs, or the record cannot be shown


@dataclass(frozen=True)
class Version:
    branch: str
    commit: str
    date: str
    variants: tuple[Variant, ...]
    bench: dict | None = None  # the branch's benchmarks/results/results.json
    plots: tuple[str, ...] = ()  # the branch's other benchmarks/**.svg: the author's own plots (peers, say)
    layers: bool = False  # a variant has layers (layers.py or layers/): KernelConfig can name one
    attention: bool = False  # the package offers flash_attn_varlen_func: transformers' attn_implementation

    @property
    def rows(self) -> list[str]:
        return list(dict.fromkeys(v.row for v in sorted(self.variants, key=_row_order)))

    @property
    def columns(self) -> list[str]:
        return sorted({v.column for v in self.variants})

    def cell(self, row: str, column: str) -> list[Variant]:
        return [v for v in self.variants if v.row == row and v.column == column]


@dataclass(frozen=True)
class KernelRepo:
    """What a kernel page and an index row share: the repo id, and its org and name."""
    repo_id: str

    @property
    def org(self) -> str:
        return self.repo_id.split("/")[0]

    @property
    def name(self) -> str:
        return self.repo_id.split("/")[1]


@dataclass(frozen=True)
class Kernel(KernelRepo):
    versions: tuple[Version, ...]  # newest first
    card: str | None  # README.md on main, as written (rendered by render.py)
    updated: str  # the newest date among its versions

    @property
    def newest(self) -> Version | None:
        return self.versions[0] if self.versions else None


@dataclass(frozen=True)
class Summary(KernelRepo):
    """A kernel's row on the index: what it shows without reading every version's variants."""
    newest: str | None  # its newest vN branch
    updated: str  # the newest date among its versions
    variants: int  # how many the newest version offers
    mirrored: str | None = None  # an upstream repo this hub serves: "<upstream> @ <commit>"


def mirrored_summaries(cache) -> list[Summary]:
    """Index rows of the upstream's kernel repos this hub has fetched (from disk: no fetch)."""
    rows = []
    for kind, repo_id in cache.repos():
        if kind != KERNEL:
            continue
        m = cache.mirrored(KERNEL, repo_id)
        seen = sorted(m["refs"].items(), key=lambda kv: kv[1].get("seen", 0), reverse=True)
        newest = next((name for name, _ in seen if _VERSION.match(name)), seen[0][0] if seen else None)
        commit = m["refs"][newest]["sha"] if newest else next(iter(m["commits"]), "")
        verified = len(m["commits"].get(commit, {}).get("verified", {}))
        rows.append(Summary(repo_id, newest, "", verified, mirrored=f"{m['upstream']} @ {commit[:12]}"))
    return rows


class Catalog:
    """The hub's kernels as pages see them, cached per commit."""

    def __init__(self, store):
        self.store = store
        self._versions: dict[tuple[str, str, str], Version] = {}  # (repo, branch, commit)
        self._cards: dict[tuple[str, str], str | None] = {}  # (repo, main's commit)
        # repo -> (its refs stamp, its (vN, commit) pairs, its row): one entry a repo
        self._rows: dict[str, tuple[tuple | None, tuple, Summary]] = {}
        self._lock = threading.Lock()

    def summaries(self) -> list[Summary]:
        """Every kernel repo's index row. A row costs its refs and, once per new commit, the
        version commits' dates and the newest one's build/ folders, not every version's files."""
        return [self._summary(repo_id) for kind, repo_id in self.store.list_repos(KERNEL)]

    def _summary(self, repo_id: str) -> Summary:
        stamp = self.store.refs_stamp(KERNEL, repo_id)
        seen = self._rows.get(repo_id)
        if stamp is not None and seen is not None and seen[0] == stamp:
            return seen[2]  # refs unchanged since the last visit (a stat or three): no refs read
        versions = tuple(_versions(self.store.branches(KERNEL, repo_id)))
        if seen is not None and seen[1] == versions:
            summary = seen[2]  # only other branches moved (main's card, say)
        else:
            dates = [self.store.commit_info(KERNEL, repo_id, commit)["date"] for _, commit in versions]
            count = self._variant_count(repo_id, versions[0][1]) if versions else 0
            summary = Summary(repo_id, versions[0][0] if versions else None, max(dates, default=""), count)
        with self._lock:
            self._rows[repo_id] = (stamp, versions, summary)
        return summary

    def _variant_count(self, repo_id: str, commit: str) -> int:
        try:
            entries = self.store.list_tree(KERNEL, repo_id, commit, BUILD)
        except HubError:
            return 0
        return sum(1 for e in entries if e.type == "directory")

    def kernel(self, repo_id: str) -> Kernel:
        branches = self.store.branches(KERNEL, repo_id)
        found = tuple(self._version(repo_id, branch, commit) for branch, commit in _versions(branches))
        card = self._card(repo_id, branches.get("main"))
        return Kernel(repo_id, found, card, max((v.date for v in found), default=""))

    def _card(self, repo_id: str, main: str | None) -> str | None:
        if main is None:
            return None
        key = (repo_id, main)
        if key not in self._cards:
            try:
                text = self.store.read_file(KERNEL, repo_id, main, "README.md").decode("utf-8", "replace")
            except HubError:
                text = None
            with self._lock:
                self._cards[key] = text
        return self._cards[key]

    def _version(self, repo_id: str, branch: str, commit: str) -> Version:
        key = (repo_id, branch, commit)
        if key not in self._versions:
            version = self._read_version(repo_id, branch, commit)
            with self._lock:
                self._versions[key] = version
        return self._versions[key]

    def _read_version(self, repo_id: str, branch: str, commit: str) -> Version:
        date = self.store.commit_info(KERNEL, repo_id, commit)["date"]
        try:
            entries = self.store.list_tree(KERNEL, repo_id, commit, BUILD, recursive=True)
        except HubError:
            entries = []
        by_variant: dict[str, list] = {}
        for e in entries:
            parts = e.path.split("/", 2)
            if e.type == "file" and len(parts) == 3:
                by_variant.setdefault(parts[1], []).append((parts[2], e.size))
        checks = self._layer_checks(repo_id, commit)
        variants = tuple(self._variant(repo_id, commit, name, files, checks.get(layer_check(name)))
                         for name, files in sorted(by_variant.items()))
        layers = any(p == "layers.py" or p.startswith("layers/") for files in by_variant.values() for p, _ in files)
        return Version(branch, commit, date, variants, self._bench(repo_id, commit), self._plots(repo_id, commit),
                       layers=layers, attention=self._attention(repo_id, commit, by_variant))

    def _attention(self, repo_id: str, commit: str, by_variant: dict[str, list]) -> bool:
        """Whether transformers' `attn_implementation="org/name@vN"` finds what it calls: it takes a hub
        kernel as attention when the package has `flash_attn_varlen_func`, so its __init__.py defines
        or imports that name (read as text: the hub never runs a kernel's code)."""
        for name, files in sorted(by_variant.items()):
            if any(p == "__init__.py" for p, _ in files):
                try:
                    text = self.store.read_file(KERNEL, repo_id, commit, repo_path(name, "__init__.py"))
                except HubError:
                    continue
                return re.search(rb"\bflash_attn_varlen_func\b", text) is not None
        return False

    def _variant(self, repo_id: str, commit: str, name: str, files: list[tuple[str, int]],
                 check_size: int | None = None) -> Variant:
        row, column = _place(name)
        size = sum(s for _, s in files)
        raw = b""
        try:
            raw = self.store.read_file(KERNEL, repo_id, commit, metadata_file(name))
            meta = VariantMetadata.from_dict(json.loads(raw))
        except HubError:
            meta = VariantMetadata(path=None)  # an older kernel-builder build: no metadata.json
        except Exception as e:  # noqa: BLE001 - a broken metadata.json is shown, not a broken page
            return Variant(name, row, column, size, tuple((p, s, "") for p, s in files), problem=str(e)[:300])
        digest = meta.digest or {}
        checked = {} if check_size is None else self._layer_check(repo_id, commit, name, check_size, raw)
        return Variant(name, row, column, size, tuple((p, s, _hex(digest.get(p, ""))) for p, s in sorted(files)),
                       archs=meta.backend.archs if meta.backend else (),
                       partial=bool(meta.backend and meta.backend.partial), floor=_floor(meta),
                       provenance=meta.provenance or {}, **checked)

    def _layer_checks(self, repo_id: str, commit: str) -> dict[str, int]:
        """The branch's published layer checks (kbuild publish: layer-checks/<variant>.json), by path: their sizes."""
        try:
            entries = self.store.list_tree(KERNEL, repo_id, commit, LAYER_CHECKS)
        except HubError:
            return {}
        return {e.path: e.size for e in entries if e.type == "file"}

    def _layer_check(self, repo_id: str, commit: str, name: str, size: int, metadata: bytes) -> dict:
        """The Variant fields that show the variant's record (read by the runtime's one reader, so a
        malformed one is a line on the page, never a failed page)."""
        try:
            if size > MAX_BYTES:
                raise UnreadableRecord(f"{size} bytes, over {MAX_BYTES}")
            check = read_record(self.store.read_file(KERNEL, repo_id, commit, layer_check(name)))
        except (HubError, UnreadableRecord) as e:
            return {"layers_checked": f"layer check unreadable ({str(e)[:200]})", "layers_bad": True}
        if check.metadata_sha256 != hashlib.sha256(metadata).hexdigest():
            return {"layers_checked": "layer check of another build (not of this metadata.json)", "layers_bad": True}
        return {"layers_checked": check.verdict(), "layers_differ": check.first_failure,
                "layers_bad": check.forward is False or check.backward is False or bool(check.first_failure)}

    def _bench(self, repo_id: str, commit: str) -> dict | None:
        try:
            doc = json.loads(self.store.read_file(KERNEL, repo_id, commit, RESULTS))
        except (HubError, ValueError):
            return None
        return doc if isinstance(doc, dict) and isinstance(doc.get("workloads"), list) else None


    def _plots(self, repo_id: str, commit: str) -> tuple[str, ...]:
        try:
            entries = self.store.list_tree(KERNEL, repo_id, commit, "benchmarks", recursive=True)
        except HubError:
            return ()
        return tuple(sorted(e.path for e in entries
                            if e.type == "file" and e.path.endswith(".svg") and e.path != RESULTS_PLOT))


def _hex(digest: str) -> str:
    """metadata.json's digest (base64 of the sha256) as `sha256sum` prints it; one that is not a
    sha256 in base64 is shown as recorded, saying so."""
    if not digest:
        return ""
    try:
        raw = base64.b64decode(digest, validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    return raw.hex() if len(raw) == 32 else f"not a sha256: {digest}"


def _versions(branches: dict[str, str]) -> list[tuple[str, str]]:
    """The (vN, commit) branches, newest first (v10 after v9, not after v1)."""
    found = sorted(((int(m.group(1)), b) for b in branches if (m := _VERSION.match(b))), reverse=True)
    return [(b, branches[b]) for _, b in found]


def _place(name: str) -> tuple[str, str]:
    """The grid cell of a variant name: (torch row, backend/compute column)."""
    try:
        v = parse_variant(name)
    except ValueError:
        return "other", name
    if v.kind == STABLE_ABI:
        row = f"stable ABI (torch >= {v.torch[0]}.{v.torch[1]})" if v.torch else "stable ABI"
    elif v.torch:
        row = f"torch {v.torch[0]}.{v.torch[1]}"
    else:
        row = "any torch (Python only)"
    names = {"cuda": "CUDA", "rocm": "ROCm", "xpu": "XPU", "cpu": "CPU", "metal": "Metal", "npu": "NPU"}
    column = names.get(v.backend, v.backend or "any")
    if v.compute_version:
        column += f" {v.compute_version[0]}.{v.compute_version[1]}"
    if v.kind == NOARCH and v.backend:
        column = f"{column} (Python only)"
    return row, column


def _row_order(v: Variant) -> tuple:
    stable = v.row.startswith("stable")
    return (not stable, [-int(x) for x in re.findall(r"\d+", v.row)])


def _floor(meta: VariantMetadata) -> str:
    abi = meta.abi
    if abi is None or not (abi.manylinux or abi.glibc):
        return ""
    parts = [f"glibc {abi.glibc}" if abi.glibc else "", f"GLIBCXX {abi.glibcxx}" if abi.glibcxx else ""]
    detail = ", ".join(p for p in parts if p)
    return f"{abi.manylinux or 'glibc'} ({detail})" if detail else (abi.manylinux or "")
