"""Where a read is answered from: the local store, or the upstream through its cache. The read
handlers (repos.py, files.py) ask `source(hub, call)` and use one interface for both, so the
routes stay the same whichever answers (docs/upstream.md).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from kbuild_hub.errors import EntryNotFound, HubRepoNotFound
from kbuild_hub.server.context import Call, Hub, iso_date
from kbuild_hub.server.file_chunks import file_chunks
from kbuild_hub.upstream.cache import Resolved, Snapshot, blob_key, file_size

STALE_HEADER = "X-Kbuild-Upstream-Stale"
MIRROR_HEADER = "X-Kbuild-Upstream"


@dataclass(frozen=True)
class FileRef:
    path: str
    size: int
    etag: str  # what clients key their cache on: the git blob id, or an LFS file's sha256


class LocalSource:
    """A repo this hub holds."""

    mirrored = False

    def __init__(self, hub: Hub, repo_type: str, repo_id: str):
        self.hub, self.store, self.repo_type, self.repo_id = hub, hub.store, repo_type, repo_id

    def resolve(self, revision: str) -> Resolved:
        return Resolved(self.store.resolve(self.repo_type, self.repo_id, revision))

    def headers(self, stale: str | None) -> dict[str, str]:
        return {}

    def commit_date(self, commit: str) -> str | None:
        return iso_date(self.store.commit_info(self.repo_type, self.repo_id, commit).get("date"))

    def refs(self) -> tuple[dict, str | None]:
        branches = self.store.branches(self.repo_type, self.repo_id)
        tags = self.store.tags(self.repo_type, self.repo_id)
        return {
            "branches": [{"name": n, "ref": f"refs/heads/{n}", "targetCommit": c} for n, c in sorted(branches.items())],
            "tags": [{"name": n, "ref": f"refs/tags/{n}", "targetCommit": c} for n, c in sorted(tags.items())],
            "converts": [],
        }, None

    def list_tree(self, commit: str, path: str, recursive: bool) -> list[dict]:
        entries = self.store.list_tree(self.repo_type, self.repo_id, commit, path, recursive=recursive)
        return [_entry(e) for e in entries]

    def paths_info(self, commit: str, asked: list[str]) -> list[dict]:
        return [_entry(e) for e in self.store.files_info(self.repo_type, self.repo_id, commit, asked)]

    def file(self, commit: str, path: str) -> FileRef:
        entry = self.store.file_info(self.repo_type, self.repo_id, commit, path)
        if entry.type != "file":
            raise EntryNotFound(f"{path} is a folder at {commit[:12]}")
        return FileRef(path, entry.size, entry.oid)

    def chunks(self, commit: str, ref: FileRef, start: int, end: int):
        copy = self.hub.blobs.path(self.store.repo_dir(self.repo_type, self.repo_id), ref.etag, ref.size)
        return file_chunks(copy, start, end)


class UpstreamSource:
    """A repo of the upstream's, through the cache: the upstream's commit ids, verified files."""

    mirrored = True

    def __init__(self, hub: Hub, repo_type: str, repo_id: str):
        self.hub, self.cache, self.repo_type, self.repo_id = hub, hub.upstream, repo_type, repo_id

    def resolve(self, revision: str) -> Resolved:
        return self.cache.resolve(self.repo_type, self.repo_id, revision)

    def headers(self, stale: str | None) -> dict[str, str]:
        headers = {MIRROR_HEADER: self.cache.upstream}
        if stale:
            headers[STALE_HEADER] = stale
        return headers

    def _snap(self, commit: str) -> Snapshot:
        return self.cache.snapshot(self.repo_type, self.repo_id, commit)

    def commit_date(self, commit: str) -> str | None:
        return self._snap(commit).last_modified

    def refs(self) -> tuple[dict, str | None]:
        return self.cache.refs(self.repo_type, self.repo_id)

    def list_tree(self, commit: str, path: str, recursive: bool) -> list[dict]:
        snap = self._snap(commit)
        if path:
            if path in snap.entries and snap.entries[path].get("type") == "file":
                raise EntryNotFound(f"{path} is a file, not a folder, at {commit[:12]} in {self.repo_id}")
            if path not in snap.entries and not any(p.startswith(path + "/") for p in snap.entries):
                raise EntryNotFound(f"{path} not found at {commit[:12]} in {self.repo_id}")
        prefix = f"{path}/" if path else ""
        return [_listed(e) for p, e in sorted(snap.entries.items())
                if p.startswith(prefix) and (recursive or "/" not in p[len(prefix):])]

    def paths_info(self, commit: str, asked: list[str]) -> list[dict]:
        snap = self._snap(commit)
        return [_listed(snap.entries[p]) for p in asked if p in snap.entries]

    def file(self, commit: str, path: str) -> FileRef:
        entry = self._snap(commit).entry(path)
        if entry.get("type") != "file":
            raise EntryNotFound(f"{path} is a folder at {commit[:12]}")
        return FileRef(path, file_size(entry), blob_key(entry))

    def chunks(self, commit: str, ref: FileRef, start: int, end: int) -> Iterator[bytes]:
        return self.cache.stream(self._snap(commit), ref.path, start, end)


def source(hub: Hub, call: Call) -> LocalSource | UpstreamSource:
    """The local repo when this hub has it; else the upstream's, when the policy lets that name
    come from the upstream; else 404."""
    repo_type, repo_id = call.repo_type, call.repo_id
    hub.store.validate_repo_id(repo_id)
    if hub.store.exists(repo_type, repo_id):
        return LocalSource(hub, repo_type, repo_id)
    cache = hub.upstream
    if cache is not None and (cache.client is not None or cache.known(repo_type, repo_id)):
        if not hub.config.upstream_policy.may_fetch(repo_id.split("/")[0], local_orgs(hub)):
            raise hub.config.upstream_policy.refuse_fall_through(repo_type, repo_id)
        return UpstreamSource(hub, repo_type, repo_id)
    raise HubRepoNotFound(f"{repo_type} repository {repo_id} not found",
                          hint="create it with HfApi.create_repo or `kbuild publish`")


def local_orgs(hub: Hub) -> set[str]:
    return {repo_id.split("/")[0] for _, repo_id in hub.store.list_repos()}


def _entry(e) -> dict:
    if e.type == "directory":
        return {"type": "directory", "oid": e.oid, "size": 0, "path": e.path}
    return {"type": "file", "oid": e.oid, "size": e.size, "path": e.path}


def _listed(e: dict) -> dict:
    """An upstream entry as listed to clients: as the upstream listed it, but for storage
    back-end fields (Xet) a client must not act on here."""
    return {k: v for k, v in e.items() if k in ("type", "oid", "size", "path", "lfs")}
