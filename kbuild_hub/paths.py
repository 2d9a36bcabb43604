"""Names a local hub accepts: repo ids, paths inside a repo, and branch names. Pure functions;
every rejection says what was wrong and what is accepted instead."""

from __future__ import annotations

import re
from urllib.parse import unquote

from kbuild_hub.errors import HubError, InvalidPath, InvalidRepoId

REPO_TYPES = ("model", "kernel", "dataset", "space")

_ID_PART = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9_])?")
_BRANCH = re.compile(r"[A-Za-z0-9._/-]+")
_SHA = re.compile(r"[0-9a-fA-F]{40}")
_DRIVE = re.compile(r"[A-Za-z]:")
MAX_ID_PART = 96
MAX_PATH = 4096
MAX_COMPONENT = 255
MAX_BRANCH = 200


class InvalidRevision(HubError):
    """A branch name git would refuse, or a parent that is not a full commit SHA."""


def validate_repo_type(repo_type: str) -> str:
    if repo_type not in REPO_TYPES:
        raise InvalidRepoId(f"unknown repo type {repo_type!r}; expected one of {', '.join(REPO_TYPES)}")
    return repo_type


def validate_repo_id(repo_id: str) -> tuple[str, str]:
    """`org/name` -> (org, name), with Hugging Face's rules for each part."""
    parts = repo_id.split("/") if isinstance(repo_id, str) else []
    if len(parts) != 2:
        raise InvalidRepoId(f"repo id {repo_id!r} must be 'org/name' (exactly one '/')")
    for part in parts:
        if len(part) > MAX_ID_PART or not _ID_PART.fullmatch(part):
            raise InvalidRepoId(
                f"repo id {repo_id!r}: {part!r} must be 1-{MAX_ID_PART} characters of A-Z a-z 0-9 . _ -, "
                "starting with a letter or digit and not ending with '.' or '-'")
        if "--" in part or ".." in part:
            raise InvalidRepoId(f"repo id {repo_id!r}: '--' and '..' are not allowed")
    if parts[1].lower().endswith(".git"):
        raise InvalidRepoId(f"repo id {repo_id!r}: a name must not end with '.git'")
    return parts[0], parts[1]


def validate_path(path: str) -> str:
    """A normalised posix path inside a repo ('a//b/' -> 'a/b'); InvalidPath for anything that
    could escape it or name git's own files, also when percent-encoded."""
    if not isinstance(path, str):
        raise InvalidPath(f"a repo path must be a string, not {type(path).__name__}")
    if not path.strip("/"):
        raise InvalidPath(f"empty repo path {path!r}")
    if not _encodes(path):
        raise InvalidPath(f"invalid repo path {path!r}: not valid Unicode (a lone surrogate)",
                          hint="send paths as UTF-8 text")
    decoded, seen = path, {path}
    for _ in range(3):  # a path some layer may decode once more must be safe decoded too
        _check_path(path, decoded)
        decoded = unquote(decoded)
        if decoded in seen:
            break
        seen.add(decoded)
    return "/".join(c for c in path.split("/") if c)


def _encodes(text: str) -> bool:
    try:
        text.encode()
        return True
    except UnicodeEncodeError:
        return False


def _check_path(original: str, path: str) -> None:
    def bad(why: str) -> InvalidPath:
        return InvalidPath(f"invalid repo path {original!r}: {why}",
                           hint="use a relative posix path like 'build/<variant>/file.so'")

    if any(ord(c) < 32 or ord(c) == 127 for c in path):
        raise bad("control characters (NUL, newline, …) are not allowed")
    if "\\" in path:
        raise bad("backslashes are not allowed; use '/'")
    if path.startswith("/") or _DRIVE.match(path):
        raise bad("absolute paths are not allowed")
    if len(path.encode()) > MAX_PATH:
        raise bad(f"longer than {MAX_PATH} bytes")
    for comp in path.split("/"):
        if comp in (".", ".."):
            raise bad(f"'{comp}' components are not allowed")
        if comp.lower().rstrip(". ") == ".git":
            raise bad("'.git' components are not allowed")
        if len(comp.encode()) > MAX_COMPONENT:
            raise bad(f"a component is longer than {MAX_COMPONENT} bytes")


def validate_branch(branch: str) -> str:
    """A branch name (a leading 'refs/heads/' is dropped) that git's check-ref-format accepts."""
    name = branch.removeprefix("refs/heads/") if isinstance(branch, str) else ""
    comps = name.split("/")
    if (not _BRANCH.fullmatch(name) or len(name) > MAX_BRANCH or name == "HEAD" or ".." in name
            or name.startswith("-") or name.endswith(".") or name.startswith("refs/")
            or any(not c or c.startswith(".") or c.endswith(".lock") for c in comps)):
        raise InvalidRevision(
            f"invalid branch name {branch!r}",
            hint="use A-Z a-z 0-9 . _ - / without '..', a leading '-' or '.', 'refs/' (a branch named "
                 "refs/tags/x would pass for a tag), or a '.lock' ending, e.g. 'v1'")
    return name


def is_sha(text: str) -> bool:
    return isinstance(text, str) and bool(_SHA.fullmatch(text))
