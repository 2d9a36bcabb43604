"""Repositories, refs and trees: the JSON half of the Hub API (docs/formats.md, "The Hub HTTP API")."""

from __future__ import annotations

from starlette.responses import JSONResponse

from kbuild_hub.errors import HubError, InvalidRepoId, RefConflict, RepoExists
from kbuild_hub.server.context import Call, Hub, repo_url
from kbuild_hub.server.routing import API_TYPES, branch_name, check_ref
from kbuild_hub.server.sources import MIRROR_HEADER, STALE_HEADER, local_orgs, source
from kbuild_hub.upstream.client import UpstreamUnavailable
from kbuild_hub.upstream.policy import ShadowsUpstream

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
    if trusted or org in local_orgs(hub):
        return JSONResponse({"name": org, "fullname": org, "type": "org", "isVerified": False,
                             "trustedKernelPublisher": trusted})
    if hub.upstream is not None:  # an org of the upstream's: its card, trust flag included, as the upstream says
        card, stale = hub.upstream.org_overview(org)
        headers = {MIRROR_HEADER: hub.upstream.upstream, **({STALE_HEADER: stale} if stale else {})}
        return JSONResponse(card, headers=headers)
    raise OrgNotFound(f"organization {org} not found: it owns no repository on this hub")


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
    if not hub.store.exists(repo_type, repo_id):
        _refuse_shadowing(hub, repo_type, repo_id)
    try:
        hub.store.create_repo(repo_type, repo_id)
    except RepoExists:
        return JSONResponse({"error": "You already created this repo", "url": url}, status_code=409,
                            headers={"X-Error-Message": "You already created this repo"})
    return JSONResponse({"url": url, "name": repo_id, "id": repo_id})


def _refuse_shadowing(hub: Hub, repo_type: str, repo_id: str) -> None:
    """A new local repo must not take a name the upstream serves (it would hide the upstream's
    from every client of this hub) unless the hub allows it."""
    cache = hub.upstream
    if cache is None or cache.client is None or hub.config.upstream_policy.allow_shadowing:
        return
    try:
        exists = cache.known(repo_type, repo_id) or cache.client.exists(repo_type, repo_id)
    except UpstreamUnavailable as e:
        raise ShadowsUpstream(f"cannot create {repo_type} repo {repo_id}: whether the upstream has that name "
                              f"cannot be checked ({e})", hint="retry when the upstream answers") from None
    if exists:
        raise ShadowsUpstream(f"cannot create {repo_type} repo {repo_id}: the upstream {cache.upstream} has a repo of "
                              "that name, which a local one would hide from this hub's clients",
                              hint="pick another name, or start the hub with --allow-shadowing")


def list_repos(hub: Hub, call: Call) -> JSONResponse:
    author, search = call.query.get("author"), call.query.get("search")
    out = []
    for _repo_type, repo_id in hub.store.list_repos(call.repo_type):
        if author and repo_id.split("/")[0] != author or search and search.lower() not in repo_id.lower():
            continue
        out.append({"id": repo_id, "author": repo_id.split("/")[0], "private": not hub.config.public_read})
    return JSONResponse(out)


def repo_info(hub: Hub, call: Call) -> JSONResponse:
    repo = source(hub, call)
    resolved = repo.resolve(check_ref(call.params.get("rev") or "main"))
    commit = resolved.commit
    with_blobs = call.flag("blobs")
    siblings = []
    for e in repo.list_tree(commit, "", recursive=True):
        if e["type"] == "file":
            siblings.append({"rfilename": e["path"], "size": e["size"], "blobId": e["oid"]} if with_blobs
                            else {"rfilename": e["path"]})
    repo_type, repo_id = repo.repo_type, repo.repo_id
    return JSONResponse({
        "_id": repo_id, "id": repo_id, "author": repo_id.split("/")[0], "sha": commit,
        "lastModified": repo.commit_date(commit), "createdAt": None,
        "private": not hub.config.public_read, "gated": False, "disabled": False,
        "downloads": 0, "likes": 0, "tags": [], "library_name": "kernels" if repo_type == "kernel" else None,
        "siblings": siblings,
    }, headers=repo.headers(resolved.stale))


def refs(hub: Hub, call: Call) -> JSONResponse:
    repo = source(hub, call)
    body, stale = repo.refs()
    body = dict(body)
    if call.flag("include_prs"):
        body.setdefault("pullRequests", [])
    else:
        body.pop("pullRequests", None)
    return JSONResponse(body, headers=repo.headers(stale))


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
    repo = source(hub, call)
    resolved = repo.resolve(check_ref(call.params["rev"]))
    path = call.params.get("path", "")
    path = hub.store.validate_path(path) if path else ""
    entries = repo.list_tree(resolved.commit, path, call.flag("recursive"))
    return JSONResponse(entries, headers=repo.headers(resolved.stale))


MAX_PATHS_INFO = 10_000


def paths_info(hub: Hub, call: Call) -> JSONResponse:
    """`POST paths-info/{rev}` with form field `paths` (repeated): the entries that exist."""
    repo = source(hub, call)
    resolved = repo.resolve(check_ref(call.params["rev"]))
    form = call.body if isinstance(call.body, dict) else {}
    asked = form.get("paths", [])
    if len(asked) > MAX_PATHS_INFO:
        raise HubError(f"paths-info: {len(asked)} paths asked for; at most {MAX_PATHS_INFO} per request")
    asked = [hub.store.validate_path(p) for p in asked]
    return JSONResponse(repo.paths_info(resolved.commit, asked), headers=repo.headers(resolved.stale))


def _object(body) -> dict:
    if not isinstance(body, dict):
        raise HubError("expected a JSON object in the request body")
    return body
