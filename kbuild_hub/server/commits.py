"""Uploads: `preupload` (every file goes up as a regular, base64 file) and the NDJSON `commit`.

A commit lands on a branch in one compare-and-swap: with `parentCommit` the branch must still
point there (409 otherwise); without it the commit goes on the branch's current head. Writes to
one repository are serialised, so parallel CI jobs publishing different variants queue up.
"""

from __future__ import annotations

from starlette.responses import JSONResponse

from kbuild_hub.errors import HubError, HubRevisionNotFound, RefConflict, TooLarge
from kbuild_hub.server.context import Call, Hub, repo_url
from kbuild_hub.server.payload import parse_commit
from kbuild_hub.server.routing import branch_name, check_ref


def preupload(hub: Hub, call: Call) -> JSONResponse:
    repo_type, repo_id = hub.require_repo(call)
    commit = hub.store.resolve(repo_type, repo_id, check_ref(call.params["rev"]))
    files = call.body.get("files") if isinstance(call.body, dict) else None
    if not isinstance(files, list):
        raise HubError('preupload: expected {"files": [{"path", "size", "sample"}, …]}')
    asked = [_preupload_entry(i, f, hub) for i, f in enumerate(files)]
    total, limit = sum(size for _, _, size in asked), hub.config.max_commit_size
    if limit is not None and total > limit:
        raise TooLarge(f"preupload: {len(asked)} files of {total} bytes in all; this hub takes commits up to {limit} "
                       "bytes", hint="publish in several commits, or raise `kbuild hub serve --max-commit-size`")
    existing = {e.path: e.oid for e in hub.store.list_tree(repo_type, repo_id, commit, "", recursive=True)
                if e.type == "file"}
    # "oid" lets the client skip files that have not changed (it compares git blob ids).
    out = [{"path": sent, "uploadMode": "regular", "shouldIgnore": False, "oid": existing.get(path)}
           for sent, path, _ in asked]
    return JSONResponse({"files": out, "commitOid": commit})


def _preupload_entry(index: int, entry, hub: Hub) -> tuple[str, str, int]:
    """(path as sent, path normalised, size) of `files[index]`, each field checked."""
    where = f"preupload: files[{index}]"
    if not isinstance(entry, dict):
        raise HubError(f"{where} must be an object {{\"path\", \"size\", \"sample\"}}, not {type(entry).__name__}")
    sent, size = entry.get("path"), entry.get("size", 0)
    if not isinstance(sent, str):
        raise HubError(f"{where}.path must be a string, not {type(sent).__name__}")
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise HubError(f"{where}.size must be a byte count (an integer >= 0), not {size!r}")
    path = hub.store.validate_path(sent)
    _check_size(path, size, hub.config.max_file_size)
    return sent, path, size


def commit(hub: Hub, call: Call) -> JSONResponse:
    repo_type, repo_id = hub.require_repo(call)
    if call.flag("create_pr"):
        raise HubError("pull requests are not supported by `kbuild hub serve`", hint="commit to a branch instead")
    branch = branch_name(call.params["rev"])
    with hub.store.scratch("commit-") as tmp:
        ops = parse_commit(call.body, hub.store.validate_path, hub.config.max_file_size, tmp)
        with hub.repo_lock(repo_type, repo_id):
            head = _branch_head(hub, repo_type, repo_id, branch)
            if ops.parent is not None and ops.parent != head:
                raise RefConflict(f"{branch} of {repo_id} is at {head[:12]}, not at parentCommit {ops.parent[:12]}",
                                  hint="another upload landed first: list the refs again and retry")
            oid = hub.store.commit(repo_type, repo_id, branch, add=list(ops.add.values()), delete=ops.delete,
                                   delete_dirs=ops.delete_dirs, message=ops.message, parent=head)
    url = f"{repo_url(call.base_url, repo_type, repo_id)}/commit/{oid}"
    return JSONResponse({"success": True, "commitUrl": url, "commitOid": oid, "pullRequestUrl": None})


def _branch_head(hub: Hub, repo_type: str, repo_id: str, branch: str) -> str:
    head = hub.store.branches(repo_type, repo_id).get(branch)
    if head is not None:
        return head
    try:
        hub.store.resolve(repo_type, repo_id, branch)
    except HubRevisionNotFound:
        raise HubRevisionNotFound(f"{repo_id} has no branch {branch}",
                               hint="create it first (HfApi.create_branch)") from None
    raise HubError(f"{branch} is not a branch of {repo_id}: commits go on a branch")


def _check_size(path: str, size, max_size: int | None) -> None:
    if max_size is not None and size > max_size:
        raise TooLarge(f"{path} is {size} bytes; this hub accepts files up to {max_size} bytes",
                       hint="raise it with `kbuild hub serve --max-file-size`")
