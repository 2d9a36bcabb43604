"""What `kbuild hub mirror` is asked to mirror: REPO[@REV] arguments and lock files, as
kbuild_hub.upstream.mirror.Request values; a malformed one is a UsageError naming the argument.

Lock files in three formats (all pin a kernel repo to a full commit id):
- kbuild's own (`kbuild lock`, kbuild/lockfile.py reads it): {"kbuild-lock": 1, "kernels": {…}};
- Hugging Face `kernels` >= 0.17 (`kernels lock`): [{"dependency": {"repo-id": …, "version": …},
  "lock": {"commit": …}}, …];
- Hugging Face `kernels` <= 0.16: [{"repo_id": …, "sha": …, "variants": {name: {"hash": …}}}, …].
"""

from __future__ import annotations

import json
from pathlib import Path

from kbuild.errors import KernelError
from kbuild.lockfile import read_lock as read_kbuild_lock
from kbuild_common.errors import UsageError
from kbuild_hub import paths
from kbuild_hub.errors import HubError
from kbuild_hub.upstream.mirror import Request

LOCK_ORIGIN = "kernels.lock"


def parse_repo(text: str, repo_type: str) -> Request:
    """`org/name`, `org/name@v1`, `org/name@branch`, `org/name@<40-hex sha>`."""
    repo_id, at, revision = text.partition("@")
    try:
        paths.validate_repo_id(repo_id)
    except HubError as e:
        raise UsageError(f"REPO {text!r}: expected ORG/NAME[@vN|@BRANCH|@SHA] ({e})") from None
    if at and not revision.strip():
        raise UsageError(f"REPO {text!r}: nothing after @; expected a version branch (v1), a branch or a full "
                         "commit id")
    return Request(repo_type, repo_id, revision.strip() or None)


def read_lock(path: Path) -> list[Request]:
    """Every kernel the lock file pins, at its commit."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise UsageError(f"--lock: cannot read {path}: {e.strerror}") from None
    except ValueError as e:
        raise UsageError(f"--lock: {path} is not JSON ({e})") from None
    if isinstance(data, dict) and "kbuild-lock" in data:
        try:
            locked = read_kbuild_lock(path)
        except KernelError as e:
            raise UsageError(f"--lock: {e}") from None
        # the metadata.json hash it records per variant is checked once mirrored (a lock pins content)
        return [Request("kernel", k.repo_id, k.commit, LOCK_ORIGIN,
                        tuple(sorted((v, h) for v, h in k.variants.items() if h))) for k in locked.values()]
    if not isinstance(data, list):
        raise UsageError(f"--lock: {path} is neither a kbuild lock file nor Hugging Face's (a JSON list of locked "
                         "kernels); write one with `kbuild lock` or `kernels lock`")
    return [_hf_entry(path, n, entry) for n, entry in enumerate(data, start=1)]


def _hf_entry(path: Path, n: int, entry) -> Request:
    repo_id = commit = None
    if isinstance(entry, dict) and isinstance(entry.get("dependency"), dict):  # kernels >= 0.17
        repo_id = entry["dependency"].get("repo-id")
        commit = (entry.get("lock") or {}).get("commit") if isinstance(entry.get("lock"), dict) else None
    elif isinstance(entry, dict):  # kernels <= 0.16
        repo_id, commit = entry.get("repo_id"), entry.get("sha")
    where = f"--lock: {path}: entry {n}"
    if not isinstance(repo_id, str) or not isinstance(commit, str):
        raise UsageError(f"{where}: expected {{\"dependency\": {{\"repo-id\": …}}, \"lock\": {{\"commit\": …}}}} "
                         "or {\"repo_id\": …, \"sha\": …}")
    try:
        paths.validate_repo_id(repo_id)
    except HubError as e:
        raise UsageError(f"{where}: {e}") from None
    if not paths.is_sha(commit):
        raise UsageError(f"{where}: {repo_id}'s commit {commit!r} is not a full 40-hex commit id")
    return Request("kernel", repo_id, commit.lower(), LOCK_ORIGIN)
