"""Hub failures, each with the Hugging Face error code the HTTP server sends for it."""

from __future__ import annotations

from kbuild_common.errors import ExitCode, KbuildError


class HubError(KbuildError):
    exit_code = ExitCode.HUB
    http_status = 400
    error_code: str | None = None
    headers: dict[str, str] | None = None  # sent with its response (server/files.py: a 404's commit, a 416's size)


class InvalidRepoId(HubError):
    error_code = "InvalidRepoId"


class InvalidPath(HubError):
    """A path that would escape the repository (.., absolute, backslash, NUL, …)."""


class HubRepoNotFound(HubError):
    """The hub store has no such repo (served as 404 RepoNotFound; a reader sees kbuild.errors.RepoNotFound)."""

    http_status = 404
    error_code = "RepoNotFound"


class HubRevisionNotFound(HubError):
    """The hub store's repo has no such branch or commit (served as 404 RevisionNotFound)."""

    http_status = 404
    error_code = "RevisionNotFound"


class EntryNotFound(HubError):
    http_status = 404
    error_code = "EntryNotFound"


class RepoExists(HubError):
    http_status = 409


class RefConflict(HubError):
    """A branch moved between reading its head and updating it (compare-and-swap failed)."""

    http_status = 409


class TooLarge(HubError):
    http_status = 413


class NoSpace(HubError):
    """The device that holds the hub is full (ENOSPC)."""

    http_status = 507


class DigestMismatch(HubError):
    """Uploaded bytes do not match the sha256 the client announced."""
