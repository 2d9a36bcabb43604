"""What this hub fetched from its upstream, on disk under the hub folder, shared by `kbuild hub
serve --upstream` and `kbuild hub mirror` (docs/upstream.md):

    <root>/.upstream/
        repos/<type>s/<org>/<name>/refs.json        the refs last seen: name -> {sha, seen}, and the refs listing
        repos/<type>s/<org>/<name>/commits/<sha>.json   the whole tree at that upstream commit (immutable)
        repos/<type>s/<org>/<name>/variants/<sha>/<variant>.ok       verified: how
        repos/<type>s/<org>/<name>/variants/<sha>/<variant>.refused  why it was refused
        orgs/<org>.json                              the organisation card last seen
        blobs/<key[:2]>/<key>                        file contents, by LFS sha256 or git blob id
        tmp/                                         downloads in flight

Commit ids are the upstream's, so `@<sha>` pins work against this hub as against the upstream.
What is stored under a commit never changes; refs are asked of the upstream on every resolution
while it answers, else the last commit seen is used and the caller is told (`Resolved.stale`).

A file enters `blobs/` only after its bytes match the upstream's listing; a file of a kernel
variant (`build/<variant>/…` beside a metadata.json, and its SSH signature in `signatures/<variant>/`)
only after the whole variant matches its metadata.json digest (verify.py). Concurrent requests for
one file share one download, and a reader follows the download as it is written (first byte out
before the last is in).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock

from kbuild import repo_layout as layout
from kbuild.digest import METADATA
from kbuild.signatures.rules import SignatureSettings
from kbuild_hub import paths
from kbuild_hub.errors import EntryNotFound, HubError, HubRevisionNotFound
from kbuild_hub.upstream.client import UpstreamClient, UpstreamMissing, UpstreamUnavailable
from kbuild_hub.upstream.verify import ContentHash, Refused, verify_variant

FOLDER = ".upstream"
_KEY = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_WAIT_S = 60.0  # a reader waits this long for a stalled download's next bytes
_SNAPSHOTS_HELD = 64  # parsed trees kept in memory: every request of a load reads its commit's
# what a reader is sent at a time: memory per client (kbuild_hub/server/file_chunks.py sends as much)
_CHUNK = 128 << 10


class NeverFetched(HubError):
    """Asked while the upstream cannot answer, and never fetched before."""

    http_status = 504


@dataclass(frozen=True)
class Resolved:
    commit: str
    stale: str | None = None  # why the upstream's answer is not fresh (what the response header says)


@dataclass(frozen=True)
class Snapshot:
    repo_type: str
    repo_id: str
    commit: str
    last_modified: str | None
    entries: dict[str, dict]  # path -> the upstream's tree entry (files and folders)

    def entry(self, path: str) -> dict:
        found = self.entries.get(path)
        if found is None:
            raise EntryNotFound(f"{path} not found at {self.commit[:12]} in {self.repo_id}")
        return found

    def variant_of(self, path: str) -> str | None:
        """The variant a file belongs to: `build/<variant>/…`, or its SSH signature in
        `signatures/<variant>/` (kbuild/repo_layout.py), beside a `build/<variant>/metadata.json`."""
        variant = layout.variant_of(path)
        if variant is not None and layout.variant_prefix(variant) + METADATA in self.entries:
            return variant
        return None

    def variant_files(self, variant: str) -> dict[str, str]:
        """Repo path -> path in the variant folder of each file of `variant` a loader fetches."""
        files = [p for p, e in self.entries.items() if e.get("type") == "file"]
        return layout.variant_paths(variant, files)


def blob_key(entry: dict) -> str:
    lfs = entry.get("lfs")
    key = (lfs.get("oid") if isinstance(lfs, dict) else None) or entry.get("oid", "")
    key = str(key).lower()
    if not _KEY.fullmatch(key):
        raise HubError(f"upstream listing of {entry.get('path')!r} has no usable object id")
    return key


def file_size(entry: dict) -> int:
    lfs = entry.get("lfs")
    return int((lfs.get("size") if isinstance(lfs, dict) else None) or entry.get("size") or 0)


class _Download:
    """One file being fetched: readers follow `part` up to `written` until `done`."""

    def __init__(self, part: Path, final: Path, size: int):
        self.part, self.final, self.size = part, final, size
        self.written, self.done = 0, False
        self.error: HubError | None = None
        self.cond = threading.Condition()


class UpstreamCache:
    def __init__(self, root: Path, client: UpstreamClient | None, signatures: SignatureSettings | None = None,
                 log=lambda line: None):
        self.dir = Path(root) / FOLDER
        self.client = client
        self.signatures = signatures or SignatureSettings()
        self.log = log
        self._guard = threading.Lock()
        self._downloads: dict[str, _Download] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._snapshots: dict[tuple[str, str, str], Snapshot] = {}  # oldest first
        self.upstream_requests = 0  # files fetched from the upstream (single-flight is measured by it)

    def close(self) -> None:
        if self.client is not None:
            self.client.close()

    @property
    def upstream(self) -> str:
        return self.client.url if self.client else "(none configured)"

    # -- refs ----------------------------------------------------------------------------------

    def resolve(self, repo_type: str, repo_id: str, revision: str) -> Resolved:
        """A full commit id for a branch, tag or commit: a full sha already fetched is answered here;
        anything else is asked of the upstream, falling back to the last commit seen for it."""
        revision = revision.removeprefix("refs/heads/").removeprefix("refs/tags/")
        if paths.is_sha(revision) and self._commit_file(repo_type, repo_id, revision.lower()).is_file():
            return Resolved(revision.lower())
        record = self._read_json(self._repo_dir(repo_type, repo_id) / "refs.json") or {}
        seen = (record.get("refs") or {}).get(revision)
        try:
            answer = self._client().revision(repo_type, repo_id, revision)
        except UpstreamUnavailable as e:
            if seen:
                return Resolved(seen["sha"], stale=f"{self._why()}; {revision} as last seen at "
                                                   f"{_iso(seen['seen'])}")
            raise NeverFetched(f"{repo_type} {repo_id}@{revision} was never fetched through this hub, "
                               f"and {e}") from None
        sha = answer["sha"]
        if paths.is_sha(revision):  # a commit is no ref: nothing to remember of it but its tree
            return Resolved(sha)
        with self._lock(f"refs:{repo_type}:{repo_id}"):
            record = self._read_json(self._repo_dir(repo_type, repo_id) / "refs.json") or {}
            record.setdefault("refs", {})[revision] = {"sha": sha, "seen": time.time()}
            record["upstream"] = self.upstream
            self._write_json(self._repo_dir(repo_type, repo_id) / "refs.json", record)
        return Resolved(sha)

    def refs(self, repo_type: str, repo_id: str) -> tuple[dict, str | None]:
        """The upstream's refs listing (branches, tags), or the last one seen with why it is stale."""
        path = self._repo_dir(repo_type, repo_id) / "refs.json"
        try:
            listing = self._client().refs(repo_type, repo_id)
        except UpstreamUnavailable as e:
            record = self._read_json(path) or {}
            if "listing" in record:
                return record["listing"], f"{self._why()}; refs as last seen at {_iso(record['listing_seen'])}"
            raise NeverFetched(f"the refs of {repo_type} {repo_id} were never fetched through this hub, "
                               f"and {e}") from None
        with self._lock(f"refs:{repo_type}:{repo_id}"):
            record = self._read_json(path) or {}
            record.update(listing=listing, listing_seen=time.time(), upstream=self.upstream)
            self._write_json(path, record)
        return listing, None

    def org_overview(self, org: str) -> tuple[dict, str | None]:
        path = self.dir / "orgs" / f"{org}.json"
        try:
            card = self._client().org_overview(org)
        except UpstreamUnavailable as e:
            record = self._read_json(path)
            if record:
                return record["card"], f"{self._why()}; organization card as last seen at {_iso(record['seen'])}"
            raise NeverFetched(f"organization {org} was never looked up through this hub, and {e}") from None
        self._write_json(path, {"card": card, "seen": time.time()})
        return card, None

    def known(self, repo_type: str, repo_id: str) -> bool:
        """Whether anything of the repo was ever fetched (its refs or a commit)."""
        return self._repo_dir(repo_type, repo_id).is_dir()

    # -- snapshots -----------------------------------------------------------------------------

    def snapshot(self, repo_type: str, repo_id: str, commit: str) -> Snapshot:
        """The tree at an upstream commit: from disk once fetched (it never changes)."""
        key = (repo_type, repo_id, commit)
        with self._guard:
            held = self._snapshots.get(key)
        if held is not None:
            return held
        path = self._commit_file(repo_type, repo_id, commit)
        record = self._read_json(path)
        if record is None:
            with self._lock(f"commit:{commit}"):
                record = self._read_json(path)
                if record is None:
                    record = self._fetch_snapshot(repo_type, repo_id, commit)
                    self._write_json(path, record)
        snap = Snapshot(repo_type, repo_id, commit, record.get("lastModified"),
                        {e["path"]: e for e in record["entries"]})
        with self._guard:  # a commit never changes: the parsed tree is kept for the next request (a few)
            self._snapshots[key] = snap
            while len(self._snapshots) > _SNAPSHOTS_HELD:
                self._snapshots.pop(next(iter(self._snapshots)))
        return snap

    def _fetch_snapshot(self, repo_type: str, repo_id: str, commit: str) -> dict:
        client = self._client()
        try:
            info = client.revision(repo_type, repo_id, commit)
            entries = client.tree(repo_type, repo_id, commit)
        except UpstreamUnavailable as e:
            raise NeverFetched(f"{repo_type} {repo_id}@{commit[:12]} was never fetched through this hub, "
                               f"and {e}") from None
        except UpstreamMissing as e:
            raise HubRevisionNotFound(str(e)) from None
        kept = []
        for entry in entries:
            if entry.get("type") not in ("file", "directory") or not isinstance(entry.get("path"), str):
                continue
            paths.validate_path(entry["path"])  # a hostile upstream's `../x` never reaches the disk
            kept.append({k: entry[k] for k in ("type", "oid", "size", "path", "lfs") if k in entry})
        return {"upstream": client.url, "sha": commit, "lastModified": info.get("lastModified"), "entries": kept}

    def commits(self, repo_type: str, repo_id: str) -> list[str]:
        folder = self._repo_dir(repo_type, repo_id) / "commits"
        return sorted(p.stem for p in folder.glob("*.json")) if folder.is_dir() else []

    def repos(self) -> list[tuple[str, str]]:
        """(repo type, repo id) of every repo something was fetched of, for the pages."""
        found = []
        for kind in paths.REPO_TYPES:
            for folder in sorted((self.dir / "repos" / f"{kind}s").glob("*/*")):
                found.append((kind, f"{folder.parent.name}/{folder.name}"))
        return found

    def refs_seen(self, repo_type: str, repo_id: str) -> dict[str, dict]:
        return (self._read_json(self._repo_dir(repo_type, repo_id) / "refs.json") or {}).get("refs") or {}

    # -- files ---------------------------------------------------------------------------------

    def cached_path(self, snap: Snapshot, path: str) -> Path | None:
        """The file's verified copy, when this hub has it."""
        entry = snap.entry(path)
        final = self._blob_path(blob_key(entry))
        variant = snap.variant_of(path)
        if variant is not None and not self._variant_marker(snap, variant, "ok").is_file():
            return None
        return final if final.is_file() else None

    def stream(self, snap: Snapshot, path: str, start: int = 0, end: int | None = None) -> Iterator[bytes]:
        """The bytes [start, end) of a file, fetched first if needed: a kernel variant's files
        all at once and verified together, any other file followed as it downloads."""
        entry = snap.entry(path)
        if entry.get("type") != "file":
            raise EntryNotFound(f"{path} is a folder at {snap.commit[:12]} in {snap.repo_id}")
        end = file_size(entry) if end is None else end
        variant = snap.variant_of(path)
        if variant is not None:
            self.ensure_variant(snap, variant)
        final = self._blob_path(blob_key(entry))
        if final.is_file():
            return _read_file(final, start, end)
        return self._follow(self._start_download(snap, entry), start, end)

    def ensure_variant(self, snap: Snapshot, variant: str) -> str:
        """Fetch and verify every file of the variant once (`build/<variant>/` and its SSH signature
        in `signatures/<variant>/`); how it was verified. Refused, with nothing of the variant kept,
        when a file fails."""
        ok, refused = self._variant_marker(snap, variant, "ok"), self._variant_marker(snap, variant, "refused")
        if ok.is_file():
            return ok.read_text()
        where = f"{snap.repo_id}@{snap.commit} {layout.variant_folder(variant)}"
        with self._lock(f"variant:{snap.commit}:{variant}"), FileLock(str(ok) + ".lock"):
            if ok.is_file():
                return ok.read_text()
            # every file served as the variant's is kept only once the variant verifies: the folder a
            # loader fetches, and a signature left in build/<variant>/ that a newer one outranks
            files = {p: e for p, e in snap.entries.items()
                     if e.get("type") == "file" and snap.variant_of(p) == variant}
            self._tmp().mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(dir=self._tmp(), prefix="variant-") as tmp:
                fetched, folder = Path(tmp) / "repo", Path(tmp) / "variant"
                try:
                    for path, entry in sorted(files.items()):
                        target = fetched / path
                        target.parent.mkdir(parents=True, exist_ok=True)
                        self._fetch_to(snap, entry, target)
                    for path, rel in snap.variant_files(variant).items():  # the folder as a loader fetches it
                        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
                        os.link(fetched / path, folder / rel)
                    how = verify_variant(folder, where, snap.repo_id.split("/")[0], self.signatures)
                except Refused as e:
                    refused.parent.mkdir(parents=True, exist_ok=True)
                    refused.write_text(str(e))
                    self.log(f"upstream: refused {where}: {e}")
                    raise
                except NeverFetched:
                    if refused.is_file():  # the upstream is down, and what it served was refused
                        raise Refused(refused.read_text()) from None
                    raise
                for path, entry in files.items():
                    final = self._blob_path(blob_key(entry))
                    final.parent.mkdir(parents=True, exist_ok=True)
                    os.replace(fetched / path, final)
            refused.unlink(missing_ok=True)
            ok.parent.mkdir(parents=True, exist_ok=True)
            ok.write_text(how)
            self.log(f"upstream: verified {where}: {how}")
            return how

    def fetch_file(self, snap: Snapshot, path: str, progress=lambda n: None) -> bool:
        """Fetch one file that is not part of a kernel variant into the cache, verified against the
        upstream's listing, without serving it (`kbuild hub mirror`); `progress(n)` hears of each
        n bytes written. False when it was cached already. It joins a download in flight for the
        same file (the single-flight download the server's readers follow)."""
        entry = snap.entry(path)
        if entry.get("type") != "file":
            raise EntryNotFound(f"{path} is a folder at {snap.commit[:12]} in {snap.repo_id}")
        if snap.variant_of(path) is not None:  # a variant is fetched and verified as a whole
            raise HubError(f"{path} is part of variant {snap.variant_of(path)}: fetch it with ensure_variant")
        if self._blob_path(blob_key(entry)).is_file():
            return False
        download = self._start_download(snap, entry)
        reported = 0
        while True:
            with download.cond:
                if download.written == reported and not download.done and not download.cond.wait(_WAIT_S):
                    raise HubError(f"the upstream stalled fetching {snap.repo_id}@{snap.commit[:12]}:{path}")
                written, done, error = download.written, download.done, download.error
            if error is not None:
                raise error
            if written > reported:
                progress(written - reported)
                reported = written
            if done:
                return True

    def _fetch_to(self, snap: Snapshot, entry: dict, target: Path) -> None:
        """One file into `target` (a cached copy is reused), checked against the upstream's listing."""
        cached = self._blob_path(blob_key(entry))
        if cached.is_file():
            shutil.copyfile(cached, target)
            return
        self._download(snap, entry, target)

    def _download(self, snap: Snapshot, entry: dict, target: Path, on_chunk=lambda n: None) -> None:
        """One upstream GET of the file into `target`, `on_chunk(n)` after each n bytes are written;
        Refused when the bytes do not match the upstream's listing, NeverFetched when it is down."""
        what = f"{snap.repo_id}@{snap.commit[:12]}:{entry['path']}"
        check = ContentHash(entry)
        self._count()
        try:
            with self._client().download(snap.repo_type, snap.repo_id, snap.commit, entry["path"]) as chunks, \
                    open(target, "wb") as out:
                for chunk in chunks:
                    check.update(chunk)
                    out.write(chunk)
                    out.flush()
                    on_chunk(len(chunk))
        except UpstreamUnavailable as e:
            raise NeverFetched(f"{what} was never fetched through this hub, and {e}") from None
        check.check(what)

    def _start_download(self, snap: Snapshot, entry: dict) -> _Download:
        """The download of this file in flight, started by the first caller."""
        key = blob_key(entry)
        with self._guard:
            running = self._downloads.get(key)
            if running is not None:
                return running
            final = self._blob_path(key)
            if final.is_file():
                done = _Download(final, final, file_size(entry))
                done.written, done.done = done.size, True
                return done
            self._tmp().mkdir(parents=True, exist_ok=True)
            fd, part = tempfile.mkstemp(dir=self._tmp(), prefix=f"{key}.")
            os.close(fd)
            download = self._downloads[key] = _Download(Path(part), final, file_size(entry))
        threading.Thread(target=self._run_download, args=(snap, entry, download), daemon=True,
                         name=f"upstream {key[:12]}").start()
        return download

    def _run_download(self, snap: Snapshot, entry: dict, download: _Download) -> None:
        def written(n: int) -> None:
            with download.cond:  # readers follow the part file up to here
                download.written += n
                download.cond.notify_all()
        try:
            self._download(snap, entry, download.part, written)
            download.final.parent.mkdir(parents=True, exist_ok=True)
            os.replace(download.part, download.final)
        except Exception as e:  # every reader must hear of it, and nothing half-fetched is kept
            what = f"{snap.repo_id}@{snap.commit[:12]}:{entry['path']}"
            error = e if isinstance(e, HubError) else HubError(f"{what}: {type(e).__name__}: {e}")
            download.error = error
            download.part.unlink(missing_ok=True)
            self.log(f"upstream: {error}")
        finally:
            with download.cond:
                download.done = True
                download.cond.notify_all()
            with self._guard:
                self._downloads.pop(download.final.name, None)

    def _follow(self, download: _Download, start: int, end: int) -> Iterator[bytes]:
        """The bytes [start, end) of a download in flight, as they are written."""
        with download.cond:
            while download.written <= start < end and not download.done:
                download.cond.wait(_WAIT_S)
            if download.error is not None and start < end:
                raise download.error
        try:
            f = open(download.part, "rb")
        except FileNotFoundError:  # finished (renamed) between the check and the open
            if download.error is not None:
                raise download.error  # noqa: B904 - the download's own failure, its cause kept
            f = open(download.final, "rb")
        return self._follow_open(download, f, start, end)

    def _follow_open(self, download: _Download, f, start: int, end: int) -> Iterator[bytes]:
        with f:
            pos = start
            while pos < end:
                with download.cond:
                    while download.written <= pos and not download.done:
                        if not download.cond.wait(_WAIT_S):
                            raise HubError(f"the upstream stalled fetching {download.final.name[:12]}")
                    if download.error is not None:
                        raise download.error
                    available = min(download.written, end) if not download.done else end
                data = os.pread(f.fileno(), min(_CHUNK, available - pos), pos)
                if not data:
                    raise HubError(f"upstream download of {download.final.name[:12]} ended early")
                pos += len(data)
                yield data

    # -- what the pages show --------------------------------------------------------------------

    def mirrored(self, repo_type: str, repo_id: str) -> dict:
        """What this hub holds of an upstream repo, read from disk only (a page never fetches):
        the upstream, the refs last seen, and per cached commit its variants verified or refused."""
        folder = self._repo_dir(repo_type, repo_id)
        record = self._read_json(folder / "refs.json") or {}
        commits = {}
        for sha in self.commits(repo_type, repo_id):
            marks = folder / "variants" / sha
            commits[sha] = {
                "verified": {p.stem: p.read_text() for p in sorted(marks.glob("*.ok"))} if marks.is_dir() else {},
                "refused": {p.stem: p.read_text() for p in sorted(marks.glob("*.refused"))} if marks.is_dir() else {},
            }
        upstream = record.get("upstream")
        for sha in commits if upstream is None else ():
            upstream = (self._read_json(self._commit_file(repo_type, repo_id, sha)) or {}).get("upstream")
            break
        return {"upstream": upstream or self.upstream, "refs": record.get("refs") or {}, "commits": commits}

    # -- plumbing ------------------------------------------------------------------------------

    def _client(self) -> UpstreamClient:
        if self.client is None:
            raise UpstreamUnavailable("no upstream is configured (kbuild hub serve --upstream URL)")
        return self.client

    def _why(self) -> str:
        return "no upstream configured" if self.client is None else "upstream unreachable"

    def _count(self) -> None:
        with self._guard:
            self.upstream_requests += 1

    def _lock(self, name: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(name, threading.Lock())

    def _repo_dir(self, repo_type: str, repo_id: str) -> Path:
        org, name = paths.validate_repo_id(repo_id)
        return self.dir / "repos" / f"{paths.validate_repo_type(repo_type)}s" / org / name

    def _commit_file(self, repo_type: str, repo_id: str, commit: str) -> Path:
        if not paths.is_sha(commit):
            raise HubRevisionNotFound(f"{commit!r} is not a full commit id")
        return self._repo_dir(repo_type, repo_id) / "commits" / f"{commit.lower()}.json"

    def _variant_marker(self, snap: Snapshot, variant: str, kind: str) -> Path:
        return self._repo_dir(snap.repo_type, snap.repo_id) / "variants" / snap.commit / f"{variant}.{kind}"

    def _blob_path(self, key: str) -> Path:
        return self.dir / "blobs" / key[:2] / key

    def _tmp(self) -> Path:
        return self.dir / "tmp"

    def _read_json(self, path: Path):
        try:
            return json.loads(path.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as e:
            raise HubError(f"{path}: unreadable cache record ({e})", hint="remove it; it is fetched again") from None

    def _write_json(self, path: Path, data) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
        with os.fdopen(fd, "w") as f:
            json.dump(data, f)
        os.replace(tmp, path)


def _read_file(path: Path, start: int, end: int) -> Iterator[bytes]:
    with open(path, "rb") as f:
        pos = start
        while pos < end:
            data = os.pread(f.fileno(), min(_CHUNK, end - pos), pos)
            if not data:
                return
            pos += len(data)
            yield data


def _iso(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))
