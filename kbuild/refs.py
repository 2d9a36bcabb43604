"""Which commit a request means: `org/repo@v3`, `version=3`, `revision=<branch|tag|sha>`.

Pure: parsing the request and resolving it against a repo's refs touch neither disk nor network.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .errors import InvalidRequest, MissingPin, RevisionNotFound

_REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*\Z")
_SHA = re.compile(r"^[0-9a-f]{40}\Z")
_VERSION_BRANCH = re.compile(r"^v(\d+)\Z")


@dataclass(frozen=True)
class KernelRef:
    """A repo and what the caller pinned: `revision` is a branch, tag or commit (`v3` for version 3)."""

    repo_id: str
    revision: str

    @property
    def is_commit(self) -> bool:
        return bool(_SHA.match(self.revision))

    @property
    def version(self) -> int | None:
        m = _VERSION_BRANCH.match(self.revision)
        return int(m[1]) if m else None

    def __str__(self) -> str:
        return f"{self.repo_id}@{self.revision}"


@dataclass(frozen=True)
class Refs:
    """A repo's branches and tags, name -> commit."""

    branches: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)

    def versions(self) -> dict[int, str]:
        """Version number -> commit, from the `v<N>` branches."""
        found = {}
        for name, sha in self.branches.items():
            if m := _VERSION_BRANCH.match(name):
                found[int(m[1])] = sha
        return dict(sorted(found.items()))

    def to_json(self) -> dict:
        return {"branches": self.branches, "tags": self.tags}

    @classmethod
    def from_json(cls, data: dict) -> Refs:
        return cls(dict(data.get("branches", {})), dict(data.get("tags", {})))


def check_repo_id(repo_id: str) -> str:
    if not isinstance(repo_id, str) or not _REPO_ID.match(repo_id) or ".." in repo_id:
        raise InvalidRequest(f"not a kernel repo id: {repo_id!r} "
                             "(expected ORG/NAME, e.g. kernels-community/activation)")
    return repo_id


def parse_request(repo_id: str, revision: str | None = None, version: int | None = None) -> KernelRef:
    """Exactly one pin: an `@` suffix, `revision=` or `version=`; InvalidRequest (MissingPin when
    there is none) saying how to pin otherwise."""
    name, at, suffix = repo_id.partition("@") if isinstance(repo_id, str) else (repo_id, "", "")
    check_repo_id(name)
    pins = [p for p in (suffix if at else None, revision, version) if p is not None]
    if at and not suffix:
        raise InvalidRequest(f"{repo_id!r}: nothing after '@' (expected e.g. {name}@v1)")
    if len(pins) > 1:
        raise InvalidRequest(f"{repo_id!r}: pin the kernel once: an @ suffix, revision= or version=, not several")
    if not pins:
        raise MissingPin(
            name, f"{name}: no version given. Pin one, so an incompatible release never reaches you: "
            f'get_kernel("{name}@v1"), get_kernel("{name}", version=1), or '
            f'get_kernel("{name}", revision="<branch, tag or commit sha>").'
        )
    if version is not None:
        if isinstance(version, bool) or not isinstance(version, int) or version < 0:
            raise InvalidRequest(f"{name}: version must be a non-negative integer (the v<N> branch), got {version!r}")
        return KernelRef(name, f"v{version}")
    pin = str(pins[0]).strip()
    for prefix in ("refs/heads/", "refs/tags/"):
        pin = pin.removeprefix(prefix)
    if not pin or any(c in pin for c in " \t\n\\") or ".." in pin:
        raise InvalidRequest(f"{repo_id!r}: {pins[0]!r} is not a branch, tag or commit")
    return KernelRef(name, pin.lower() if _SHA.match(pin.lower()) else pin)


def resolve(ref: KernelRef, refs: Refs, where: str) -> str:
    """The commit `ref` names; RevisionNotFound listing what exists when it names nothing."""
    if ref.is_commit:
        return ref.revision
    if ref.revision in refs.branches:
        return refs.branches[ref.revision]
    if ref.revision in refs.tags:
        return refs.tags[ref.revision]
    available = describe_versions(refs)
    if ref.version is not None:
        raise RevisionNotFound(f"{ref.repo_id} has no version {ref.version} on {where}; "
                               f"available versions: {available}")
    raise RevisionNotFound(
        f"{ref.repo_id} has no branch or tag {ref.revision!r} on {where}; available versions: {available}"
        + _version_hint(ref, refs)
        + (f"; other branches: {', '.join(sorted(b for b in refs.branches if not _VERSION_BRANCH.match(b)))}"
           if any(not _VERSION_BRANCH.match(b) for b in refs.branches) else "")
        + (f"; tags: {', '.join(sorted(refs.tags))}" if refs.tags else "")
    )


def _version_hint(ref: KernelRef, refs: Refs) -> str:
    """For a bare number (`org/k@1`): versions are the v<N> branches, so say which name was meant."""
    if not ref.revision.isdigit():
        return ""
    if f"v{int(ref.revision)}" in refs.branches:
        return f" (did you mean {ref.repo_id}@v{int(ref.revision)}?)"
    return f" (a version is pinned as {ref.repo_id}@v<N> or version=N)"


def describe_versions(refs: Refs) -> str:
    versions = refs.versions()
    return ", ".join(f"v{v}" for v in versions) if versions else "none (no v<N> branch)"
