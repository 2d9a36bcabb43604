"""Repositories, refs and trees: the JSON half of the Hub API (docs/formats.md, "The Hub HTTP API")."""

from __future__ import annotations

from starlette.responses import JSONResponse

from kbuild_hub.errors import HubError, InvalidRepoId, RefConflict, RepoExists
from kbuild_hub.server.context import Call, Hub, iso_date, repo_url
from kbuild_hub.server.routing import API_TYPES, branch_name, check_ref

USER = "kbuild"


class OrgNotFound(HubError):
    http_status = 404


def whoami(hub: Hub, call: Call) -> JSONResponse:
    orgs = sorted({repo_id.split("/")[0] for _, repo_id in hub.store.list_repos()})
    return JSONResponse({
        "type": "user", "id": USER, "name": USER, "fullname": "kbuild local hub", "isPro": False,
        "orgs": [{"type": "org", "name": org, "fullname": org, "roleInOrg": "write"} for org in orgs],
        "auth": {"type": "access_token", "accessToken": {"displayName": "kbuild hub serve", "role": "write"}},
    })


def org_overview(hub: Hub, call: Call) -> JSONResponse:
    """The organisation card Hugging Face's `kernels` loader reads for `trustedKernelPublisher`. Only
    orgs named with --trusted-org are trusted; the others load with `trust_remote_code=True`."""
    org = call.params["org"]
    trusted = org in hub.config.trusted_orgs
    if not trusted and not any(r.split("/")[0] == org for _, r in hub.store.list_repos()):
        raise OrgNotFound(f"organization {org} not found: it owns no repository on this hub")
    return JSONResponse({"name": org, "fullname": org, "type": "org", "isVerified": False,
                         "trustedKernelPublisher": trusted})


def validate_yaml(hub: Hub, call: Call) -> JSONResponse:
    # Cards are the publisher's business; huggingface_hub asks before committing a README.md.
    return JSONResponse({"errors": [], "warnings": []})


def agent_harnesses(hub: Hub, call: Call) -> JSONResponse:
    # huggingface_hub asks once per process and caches a 200 for a day; a 404 would make every
    # process ask again. An empty registry turns its agent detection off.
    return JSONResponse({"standardEnvVars": [], "harnesses": {}})


def create_repo(hub: Hub, call: Call) -> JSONResponse:
    body = _object(call.body)
    repo_type = body.get("type") or "model"
    if repo_type not in API_TYPES.values():
        raise HubError(f"unknown repo type {repo_type!r}", hint="one of model, kernel, dataset, space")
    org, name = body.get("organization"), body.get("name")
    if not org or not name:
        raise InvalidRepoId(f"repo id {name!r} needs an organization: this hub has no per-user namespaces",
                            hint="create `<org>/<name>`")
    repo_id = f"{org}/{name}"
    url = repo_url(call.base_url, repo_type, repo_id)
    try:
        hub.store.create_repo(repo_type, repo_id)
    except RepoExists:
        return JSONResponse({"error": "You already created this repo", "url": url}, status_code=409,
                            headers={"X-Error-Message": "You already created this repo"})
    return JSONResponse({"url": url, "name": repo_id, "id": repo_id})


def list_repos(hub: Hub, call: Call) -> JSONResponse:
    author, search = call.query.get("author"), call.query.get("search")
    out = []
    for repo_type, repo_id in hub.store.list_repos(call.repo_type):
        if author and repo_id.split("/")[0] != author or search and search.lower() not in repo_id.lower():
            continue
        out.append({"id": repo_id, "author": repo_id.split("/")[0], "private": not hub.config.public_read})
    return JSONResponse(out)


def repo_info(hub: Hub, call: Call) -> JSONResponse:
    repo_type, repo_id = hub.require_repo(call)
    revision = call.params.get("rev") or "main"
    check_ref(revision)
    commit = hub.store.resolve(repo_type, repo_id, revision)
    info = hub.store.commit_info(repo_type, repo_id, commit)
    with_blobs = call.flag("blobs")
    siblings = []
    for e in hub.store.list_tree(repo_type, repo_id, commit, "", recursive=True):
        if e.type == "file":
            siblings.append({"rfilename": e.path, "size": e.size, "blobId": e.oid} if with_blobs
                            else {"rfilename": e.path})
    return JSONResponse({
        "_id": repo_id, "id": repo_id, "author": repo_id.split("/")[0], "sha": commit,
        "lastModified": iso_date(info.get("date")), "createdAt": None,
        "private": not hub.config.public_read, "gated": False, "disabled": False,
        "downloads": 0, "likes": 0, "tags": [], "library_name": "kernels" if repo_type == "kernel" else None,
        "siblings": siblings,
    })


def refs(hub: Hub, call: Call) -> JSONResponse:
    repo_type, repo_id = hub.require_repo(call)
    branches = hub.store.branches(repo_type, repo_id)
    tags = hub.store.tags(repo_type, repo_id)
    body = {
        "branches": [{"name": n, "ref": f"refs/heads/{n}", "targetCommit": c} for n, c in sorted(branches.items())],
        "tags": [{"name": n, "ref": f"refs/tags/{n}", "targetCommit": c} for n, c in sorted(tags.items())],
        "converts": [],
    }
    if call.flag("include_prs"):
        body["pullRequests"] = []
    return JSONResponse(body)


def create_branch(hub: Hub, call: Call) -> JSONResponse:
    repo_type, repo_id = hub.require_repo(call)
    branch = branch_name(call.params["branch"])
    start = _object(call.body).get("startingPoint") if call.body else None
    if start is not None:
        start = hub.store.resolve(repo_type, repo_id, check_ref(start, "startingPoint"))
    with hub.repo_lock(repo_type, repo_id):
        if branch in hub.store.branches(repo_type, repo_id):
            raise RefConflict(f"branch {branch} already exists in {repo_id}")
        hub.store.create_branch(repo_type, repo_id, branch, start)
    return JSONResponse({})


def delete_branch(hub: Hub, call: Call) -> JSONResponse:
    repo_type, repo_id = hub.require_repo(call)
    branch = branch_name(call.params["branch"])
    with hub.repo_lock(repo_type, repo_id):
        hub.store.delete_branch(repo_type, repo_id, branch)
    return JSONResponse({})


def tree(hub: Hub, call: Call) -> JSONResponse:
    """`tree/{rev}[/{path}]`: a folder's entries (folders as `{"type": "directory"}` entries — the
    `kernels` loader finds variants that way), or everything under it with `recursive=true`."""
    repo_type, repo_id = hub.require_repo(call)
    commit = hub.store.resolve(repo_type, repo_id, check_ref(call.params["rev"]))
    path = call.params.get("path", "")
    path = hub.store.validate_path(path) if path else ""
    entries = hub.store.list_tree(repo_type, repo_id, commit, path, recursive=call.flag("recursive"))
    return JSONResponse([_entry(e) for e in entries])


MAX_PATHS_INFO = 10_000


def paths_info(hub: Hub, call: Call) -> JSONResponse:
    """`POST paths-info/{rev}` with form field `paths` (repeated): the entries that exist."""
    repo_type, repo_id = hub.require_repo(call)
    commit = hub.store.resolve(repo_type, repo_id, check_ref(call.params["rev"]))
    form = call.body if isinstance(call.body, dict) else {}
    asked = form.get("paths", [])
    if len(asked) > MAX_PATHS_INFO:
        raise HubError(f"paths-info: {len(asked)} paths asked for; at most {MAX_PATHS_INFO} per request")
    return JSONResponse([_entry(e) for e in hub.store.files_info(repo_type, repo_id, commit, asked)])


def _entry(e) -> dict:
    if e.type == "directory":
        return {"type": "directory", "oid": e.oid, "size": 0, "path": e.path}
    return {"type": "file", "oid": e.oid, "size": e.size, "path": e.path}


def _object(body) -> dict:
    if not isinstance(body, dict):
        raise HubError("expected a JSON object in the request body")
    return body
