"""The pages' routes, served by `kbuild hub serve` beside the Hub API (kbuild_hub/server/app.py
appends them): `/`, `/<org>/<name>`, `/<org>/<name>/tree/<vN>/<variant>` and
`/<org>/<name>/fit?version=vN&torch=2.13&cuda=13.0&arch=9.0`. They read like the API (`read`
access: a private hub asks for the token here too, as a browser can give it: HTTP Basic, the
token as the password)."""

from __future__ import annotations

import re
import threading

from starlette.responses import HTMLResponse, Response

from kbuild.errors import KernelError
from kbuild.hub_loader import get_kernel_variants
from kbuild.variants import SystemInfo
from kbuild_hub.errors import HubError, HubRepoNotFound, HubRevisionNotFound
from kbuild_hub.pages.model import KERNEL, Catalog, mirrored_summaries
from kbuild_hub.pages.render import page
from kbuild_hub.route import Route

_CATALOGS: dict[int, Catalog] = {}  # one per store: what it derived from commits stays warm
_GUARD = threading.Lock()
_VERSION = re.compile(r"^\d+\.\d+$")


def _catalog(hub) -> Catalog:
    with _GUARD:
        return _CATALOGS.setdefault(id(hub.store), Catalog(hub.store))


def _html(text: str, status: int = 200) -> HTMLResponse:
    # no script runs on these pages, and nothing may frame them
    return HTMLResponse(text, status, headers={"Content-Security-Policy": "default-src 'none'; img-src 'self'; "
                                       "style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'",
                                       "X-Content-Type-Options": "nosniff"})


def sign_in_page(refused: HubError) -> HTMLResponse:
    """A private hub's answer to a page read without a token it knows: 401 with a Basic
    challenge, so the browser asks for it (a browser cannot send a bearer token by itself)."""
    response = _html(page("error.html", heading="Sign in", message=f"This hub is private: {refused}",
                          hint="Sign in with any user name and a token of this hub as the password "
                               "(kbuild hub serve's --token-file)."), 401)
    response.headers["WWW-Authenticate"] = 'Basic realm="kbuild hub", charset="UTF-8"'
    return response


def _shown_as_page(handler):
    """A page's errors as a page (with the API's status), not as the API's JSON."""
    def run(hub, call) -> HTMLResponse:
        try:
            return handler(hub, call)
        except HubError as e:
            return _html(page("error.html", message=str(e), hint=getattr(e, "hint", None)), e.http_status)
        except KernelError as e:  # the loader's, from the fit page
            return _html(page("error.html", message=str(e), hint=None), 404)
    run.__name__ = handler.__name__
    return run


@_shown_as_page
def index(hub, call) -> HTMLResponse:
    kernels = _catalog(hub).summaries()
    if hub.upstream is not None:
        kernels += mirrored_summaries(hub.upstream)
    query = (call.query.get("q") or "").strip()
    shown = [k for k in kernels if query.lower() in k.repo_id.lower()] if query else kernels
    return _html(page("index.html", kernels=shown, total=len(kernels), query=query))


@_shown_as_page
def kernel(hub, call) -> HTMLResponse:
    repo_id = f"{call.params['ns']}/{call.params['name']}"
    if not hub.store.exists(KERNEL, repo_id) and hub.upstream is not None and hub.upstream.known(KERNEL, repo_id):
        # a repo of the upstream's: what this hub fetched and verified of it, never a fetch
        return _html(page("mirror.html", repo_id=repo_id, m=hub.upstream.mirrored(KERNEL, repo_id)))
    k = _kernel(hub, call)
    # the org card's trustedKernelPublisher (--trusted-org): the Use-it lines work as copied either way
    return _html(page("kernel.html", k=k, base_url=call.base_url, trusted=k.org in hub.config.trusted_orgs))


@_shown_as_page
def variant(hub, call) -> HTMLResponse:
    k = _kernel(hub, call)
    version = _version(k, call.params["rev"])
    found = next((v for v in version.variants if v.name == call.params["variant"]), None)
    if found is None:
        raise HubRevisionNotFound(f"{k.repo_id}@{version.branch} has no variant {call.params['variant']}")
    return _html(page("variant.html", k=k, version=version, variant=found))


@_shown_as_page
def fit(hub, call) -> HTMLResponse:
    k = _kernel(hub, call)
    version = _version(k, call.query.get("version") or (k.newest.branch if k.newest else ""))
    system = _system(call.query)
    trace = get_kernel_variants(k.repo_id, revision=version.commit, hub=str(hub.config.root), system=system)
    chosen = trace[0] if trace and trace[0].accepted else None
    return _html(page("fit.html", k=k, version=version.branch, system=system.describe(), trace=trace,
                      chosen=chosen, glibc=system.glibc))


def _kernel(hub, call):
    repo_id = f"{call.params['ns']}/{call.params['name']}"
    if not hub.store.exists(KERNEL, repo_id):
        raise HubRepoNotFound(f"no kernel repo {repo_id} on this hub")
    return _catalog(hub).kernel(repo_id)


def _version(k, branch: str):
    found = next((v for v in k.versions if v.branch == branch), None)
    if found is None:
        known = ", ".join(v.branch for v in k.versions) or "none"
        raise HubRevisionNotFound(f"{k.repo_id} has no version {branch!r} (its versions: {known})")
    return found


def _system(query) -> SystemInfo:
    """The machine the fit form describes; a malformed field is a 400 naming it."""
    def number(name: str, default: str | None) -> tuple[int, int] | None:
        text = (query.get(name) if name in query else default) or ""
        if not text.strip():
            return None
        if not _VERSION.match(text.strip()):
            raise HubError(f"{name}: expected MAJOR.MINOR such as 2.13, got {text!r}")
        major, minor = text.strip().split(".")
        return int(major), int(minor)

    torch = number("torch", "2.14")
    if torch is None:
        raise HubError("torch: expected MAJOR.MINOR such as 2.13, got nothing")
    cuda = number("cuda", None)
    arch = (query.get("arch") or "").strip() or None
    if arch is not None and not _VERSION.match(arch):
        raise HubError(f"arch: expected a CUDA compute capability such as 9.0, got {arch!r}")
    glibc = number("glibc", None)
    return SystemInfo(torch=torch, backend="cuda" if cuda else "cpu", compute_version=cuda, cpu="x86_64", os="linux",
                      glibc=glibc, gpu_arch=arch if cuda else None, python_env=False)


def favicon(hub, call) -> Response:
    # a browser asks for /favicon.ico beside every page: no icon, and no 404 in its console either
    return Response(status_code=204)


PAGE_ROUTES = [
    Route("GET", ("favicon.ico",), favicon, "none", body="none", page=True),
    Route("GET", (), index, "read", body="none", page=True),
    Route("GET", ("{ns}", "{name}"), kernel, "read", body="none", page=True),
    Route("GET", ("{ns}", "{name}", "fit"), fit, "read", body="none", page=True),
    Route("GET", ("{ns}", "{name}", "tree", "{rev}", "{variant}"), variant, "read", body="none", page=True),
]
