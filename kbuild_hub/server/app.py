"""The ASGI application: route, authorise, read the body, run the handler in a worker thread,
render errors the way huggingface_hub reads them, and log one line per request."""

from __future__ import annotations

import io
import json
import time
from collections.abc import Callable
from urllib.parse import parse_qs

import anyio.from_thread
import anyio.to_thread
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response

from kbuild.hubs.identity import KBUILD_HUB_HEADER, KBUILD_HUB_VALUE
from kbuild_hub.errors import HubError, TooLarge
from kbuild_hub.pages.routes import PAGE_ROUTES, sign_in_page
from kbuild_hub.route import Route
from kbuild_hub.server import commits, files, repos
from kbuild_hub.server.auth import Forbidden, Unauthorized, check_access, request_token
from kbuild_hub.server.context import Call, Hub
from kbuild_hub.server.routing import match, resolve_target, split_raw_path

JSON_BODY_MAX = 16 << 20
# Bodies of read routes (paths-info's form) need no more: anyone may send them on a public hub.
READ_BODY_MAX = 1 << 20



def _repo(*rest: str) -> tuple[str, ...]:
    return ("api", "{types}", "{ns}", "{name}", *rest)


# (method, path pattern, handler, who may call it, how the body is read): docs/formats.md, "The Hub HTTP API".
ROUTES = [
    Route("GET", ("api", "whoami-v2"), repos.whoami, "user", body="none"),
    Route("POST", ("api", "repos", "create"), repos.create_repo, "write"),
    Route("POST", ("api", "validate-yaml"), repos.validate_yaml, "none"),
    Route("GET", ("api", "agent-harnesses"), repos.agent_harnesses, "none", body="none"),
    Route("GET", ("api", "organizations", "{org}", "overview"), repos.org_overview, "read", body="none"),
    Route("GET", ("api", "{types}"), repos.list_repos, "read", body="none"),
    Route("GET", _repo(), repos.repo_info, "read", body="none"),
    Route("GET", _repo("revision", "{rev}"), repos.repo_info, "read", body="none"),
    Route("GET", _repo("refs"), repos.refs, "read", body="none"),
    Route("GET", _repo("tree", "{rev}", "*path"), repos.tree, "read", body="none"),
    Route("POST", _repo("paths-info", "{rev}"), repos.paths_info, "read", body="form"),
    Route("POST", _repo("branch", "{branch}"), repos.create_branch, "write"),
    Route("DELETE", _repo("branch", "{branch}"), repos.delete_branch, "write", body="none"),
    Route("POST", _repo("preupload", "{rev}"), commits.preupload, "write"),
    Route("POST", _repo("commit", "{rev}"), commits.commit, "write", body="stream"),
]
ROUTES += PAGE_ROUTES  # the web pages (kbuild_hub/pages/), after the API: its paths win
# `…/resolve/{rev}/{path}` has its own matcher (models have no type prefix): routing.resolve_target.
RESOLVE = Route("GET", (), files.resolve, "read", body="none")


class NotFound(HubError):
    http_status = 404


class HubApp:
    """`HubApp(hub, log)` is an ASGI app; `log` gets one line per request."""

    def __init__(self, hub: Hub, log: Callable[[str], None]):
        self.hub, self.log = hub, log

    def close(self) -> None:
        """Release what outlives requests: the upstream client's connections."""
        if self.hub.upstream is not None:
            self.hub.upstream.close()

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return
        started, status = time.perf_counter(), [0]

        async def send_logged(message):
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        request = Request(scope, receive)
        try:
            response = await self._handle(request)
        except HubError as e:
            response = error_response(e, scope["method"])
        except Exception as e:  # a bug: answer 500 with the reason rather than a bare reset
            response = error_response(HubError(f"internal error: {type(e).__name__}: {e}"), scope["method"], 500)
        # kbuild's clients tell this hub from the Hugging Face Hub by it (its pages, its token file)
        response.headers[KBUILD_HUB_HEADER] = KBUILD_HUB_VALUE
        try:
            await response(scope, receive, send_logged)
        finally:
            path = scope.get("raw_path", scope["path"].encode()).decode("latin-1")
            query = _redact(scope.get("query_string", b"").decode("latin-1"))
            ms = (time.perf_counter() - started) * 1000
            self.log(f"{scope['method']} {path}{'?' + query if query else ''} {status[0]} {ms:.1f}ms")

    async def _handle(self, request: Request) -> Response:
        segments = split_raw_path(request.scope.get("raw_path") or request.scope["path"].encode())
        found = match(ROUTES, request.method, segments)
        if found is not None:
            route, params = found.route, found.params
        elif request.method in ("GET", "HEAD") and (target := resolve_target(segments)) is not None:
            route, params = RESOLVE, target
        else:
            raise NotFound(f"no such endpoint: {request.method} {request.url.path}")
        token = request_token(request.headers.get("authorization"))
        config = self.hub.config
        try:
            check_access(config.tokens, route.access, token, public_read=config.public_read)
        except (Unauthorized, Forbidden) as e:
            if route.page:
                return sign_in_page(e)
            raise
        call = Call(method=request.method, params=params, query=request.query_params, base_url=_base_url(request))
        if route is RESOLVE:
            return await anyio.to_thread.run_sync(files.resolve, self.hub, call, request.headers.get("range"))
        if route.body == "stream":
            # Parsed as it arrives (payload.py): a file over --max-file-size is cut off at the
            # limit, and nothing of the body is spooled anywhere first.
            limit = config.max_commit_size
            _refuse_declared_over(request, limit, "--max-commit-size")
            body = io.BufferedReader(RequestBodyReader(request, limit), 1 << 20)
            return await anyio.to_thread.run_sync(route.handler, self.hub, _with_body(call, body))
        if route.body != "none":
            limit = READ_BODY_MAX if route.access == "read" else JSON_BODY_MAX
            call = _with_body(call, await _read_body(request, route.body, limit))
        return await anyio.to_thread.run_sync(route.handler, self.hub, call)


def _redact(query: str) -> str:
    """The query string for the log, with the value of any *token* parameter hidden."""
    parts = [(k, "***" if "token" in k.lower() else v) for k, _, v in (p.partition("=") for p in query.split("&") if p)]
    return "&".join(f"{k}={v}" for k, v in parts)


def _with_body(call: Call, body) -> Call:
    return Call(call.method, call.params, call.query, call.base_url, body)


def _refuse_declared_over(request: Request, limit: int | None, setting: str | None = None) -> None:
    """413 before a byte of the body is read when its declared length is over `limit`."""
    declared = request.headers.get("content-length", "")
    if limit is not None and declared.isdigit() and int(declared) > limit:
        raise TooLarge(f"request body of {declared} bytes is over this route's limit of {limit} bytes",
                       hint=f"raise it with `kbuild hub serve {setting}`" if setting else None)


class RequestBodyReader(io.RawIOBase):
    """The request body as a blocking binary stream for a handler in a worker thread: each read
    waits on the event loop for the next chunk. Over `limit` bytes in all → TooLarge."""

    def __init__(self, request: Request, limit: int | None):
        self._chunks, self._limit = request.stream(), limit  # an async generator: its own iterator
        self._pending, self._total, self._done = b"", 0, False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        while not self._pending and not self._done:
            try:
                self._pending = anyio.from_thread.run(self._chunks.__anext__)
            except StopAsyncIteration:
                self._done = True
            except ClientDisconnect:
                raise HubError("the client closed the connection before the body was complete") from None
            self._total += len(self._pending)
            if self._limit is not None and self._total > self._limit:
                raise TooLarge(f"request body over this route's limit of {self._limit} bytes",
                               hint="raise it with `kbuild hub serve --max-commit-size`")
        n = min(len(buffer), len(self._pending))
        buffer[:n], self._pending = self._pending[:n], self._pending[n:]
        return n


async def _read_body(request: Request, kind: str, limit: int):
    _refuse_declared_over(request, limit)
    raw = bytearray()
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > limit:
            raise TooLarge(f"request body over this route's limit of {limit} bytes")
    if not raw.strip():
        return {}
    if kind == "form":
        return parse_qs(raw.decode("utf-8", "replace"), keep_blank_values=True)
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):  # RecursionError: nesting too deep
        raise HubError("the request body is not valid JSON") from None


def _base_url(request: Request) -> str:
    host = request.headers.get("host") or f"{request.url.hostname}:{request.url.port}"
    return f"{request.url.scheme}://{host}"


def error_response(e: HubError, method: str, status: int | None = None) -> Response:
    """Non-2xx with `X-Error-Code` / `X-Error-Message` (what huggingface_hub maps to its error
    classes) and a JSON `{"error": …}` body."""
    message = str(e) + (f" (hint: {e.hint})" if e.hint else "")
    headers = {"X-Error-Message": _header_safe(message), **(e.headers or {})}
    if e.error_code:
        headers["X-Error-Code"] = e.error_code
    status = status or e.http_status
    if method == "HEAD":
        return Response(status_code=status, headers=headers)
    return JSONResponse({"error": message}, status_code=status, headers=headers)


def _header_safe(text: str) -> str:
    """`text` as a header value: one line, control characters (NUL…) and non-latin-1 escaped."""
    text = " ".join(text.split()).encode("latin-1", "backslashreplace").decode("latin-1")
    return "".join(c if 32 <= ord(c) != 127 else f"\\x{ord(c):02x}" for c in text)[:2000]
