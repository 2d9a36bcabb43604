"""Every request to the upstream hub: huggingface_hub's headers (auth, user agent) and its error
mapping (`hf_raise_for_status`) on this client's own HTTP connection pool, with per-phase timeouts.

Its own pool, not huggingface_hub's shared session: huggingface_hub closes that session on any
connection error (`http_backoff` calls `close_session()`), which in a server would cut every other
download in flight whenever the upstream drops one connection. The retry is this module's: one
more try of an idempotent GET after a dropped connection or a 502/503/504, for files only (a ref
asked of an upstream that is down is answered as last seen, at once).

The upstream sees only the upstream token (`--upstream-token-file`), never a client's: a client's
token is for this hub. Nothing here writes to the upstream.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from kbuild_hub.errors import HubError

if TYPE_CHECKING:
    import httpx2

API_WORDS = {"model": "models", "kernel": "kernels", "dataset": "datasets", "space": "spaces"}
URL_PREFIXES = {"model": "", "kernel": "kernels/", "dataset": "datasets/", "space": "spaces/"}
CHUNK = 1 << 20


class UpstreamUnavailable(HubError):
    """The upstream did not answer (refused, timed out, 5xx): callers may serve what they last saw."""

    http_status = 504


class UpstreamMissing(HubError):
    """The upstream answered that it has no such repo, revision or file."""

    http_status = 404
    error_code = "RepoNotFound"


class UpstreamRefused(HubError):
    """The upstream refused this hub's request (401/403): its token is missing or lacks access."""

    http_status = 502


class UpstreamClient:
    def __init__(self, url: str, token: str | None = None, *, connect_timeout: float = 5.0,
                 read_timeout: float = 30.0, retries: int = 1):
        self.url = url.rstrip("/")
        self._token = token
        self._timeouts = (connect_timeout, read_timeout)
        self._retries = retries
        self._http: httpx2.Client | None = None
        self._guard = threading.Lock()

    def __repr__(self) -> str:  # never the token
        return f"UpstreamClient({self.url!r})"

    # -- JSON ----------------------------------------------------------------------------------

    def revision(self, repo_type: str, repo_id: str, ref: str) -> dict:
        """`{"sha": <full commit>, "lastModified": …}` of a branch, tag or commit."""
        data = self._json(f"/api/{API_WORDS[repo_type]}/{repo_id}/revision/{quote(ref, safe='')}",
                          what=f"{repo_type} {repo_id}@{ref}")
        if not isinstance(data, dict) or not isinstance(data.get("sha"), str) or len(data["sha"]) != 40:
            raise UpstreamUnavailable(f"upstream {self.url}: {repo_id}@{ref}: the answer has no full commit sha")
        return data

    def refs(self, repo_type: str, repo_id: str) -> dict:
        data = self._json(f"/api/{API_WORDS[repo_type]}/{repo_id}/refs", what=f"{repo_type} {repo_id}")
        if not isinstance(data, dict):
            raise UpstreamUnavailable(f"upstream {self.url}: {repo_id}: refs are not a JSON object")
        return data

    def tree(self, repo_type: str, repo_id: str, commit: str) -> list[dict]:
        """Every entry (files and folders) at `commit`, following the upstream's pages (`Link: next`)."""
        what = f"{repo_type} {repo_id}@{commit[:12]}"
        url: str | None = f"{self.url}/api/{API_WORDS[repo_type]}/{repo_id}/tree/{commit}?recursive=true&expand=false"
        entries: list[dict] = []
        while url:
            response = self._get(url, what, retries=self._retries)
            page = self._decoded(response, what)
            if not isinstance(page, list):
                raise UpstreamUnavailable(f"upstream {self.url}: {what}: the tree is not a JSON list")
            entries += [e for e in page if isinstance(e, dict)]
            url = response.links.get("next", {}).get("url")
        return entries

    def org_overview(self, org: str) -> dict:
        data = self._json(f"/api/organizations/{org}/overview", what=f"organization {org}")
        return data if isinstance(data, dict) else {}

    def exists(self, repo_type: str, repo_id: str) -> bool:
        """Whether the upstream has the repo; UpstreamUnavailable when it cannot say."""
        try:
            self.refs(repo_type, repo_id)
            return True
        except UpstreamMissing:
            return False

    # -- files ---------------------------------------------------------------------------------

    @contextmanager
    def download(self, repo_type: str, repo_id: str, commit: str, path: str) -> Iterator[Iterator[bytes]]:
        """The file's bytes, as they arrive. Redirects to a storage host (LFS, Xet) are followed;
        the HTTP client drops this hub's token when a redirect leaves the upstream's origin."""
        from huggingface_hub.utils import hf_raise_for_status

        url = f"{self.url}/{URL_PREFIXES[repo_type]}{repo_id}/resolve/{commit}/{quote(path)}"
        what = f"{repo_id}@{commit[:12]}:{path}"
        for attempt in range(self._retries + 1):
            try:
                with self._client().stream("GET", url, headers=self._headers()) as response:
                    if response.status_code in _RETRY_STATUS and attempt < self._retries:
                        continue
                    try:
                        hf_raise_for_status(response)
                    except Exception as e:
                        raise self._error(e, what) from None
                    yield response.iter_bytes(CHUNK)
                    return
            except HubError:
                raise
            except Exception as e:
                if attempt < self._retries and _transport_error(e):
                    time.sleep(0.5)
                    continue
                raise self._error(e, what) from None

    # -- plumbing ------------------------------------------------------------------------------

    def _json(self, path: str, *, what: str) -> Any:
        # no retry: a ref asked of an upstream that is down is answered as last seen, at once
        return self._decoded(self._get(self.url + path, what, retries=0), what)

    def _get(self, url: str, what: str, retries: int):
        from huggingface_hub.utils import hf_raise_for_status

        for attempt in range(retries + 1):
            try:
                response = self._client().get(url, headers=self._headers())
                if response.status_code in _RETRY_STATUS and attempt < retries:
                    continue
                hf_raise_for_status(response)
                return response
            except Exception as e:
                if attempt < retries and _transport_error(e):
                    time.sleep(0.5)
                    continue
                raise self._error(e, what) from None
        raise AssertionError("unreachable")

    def _decoded(self, response, what: str) -> Any:
        try:
            return response.json()
        except ValueError:
            raise UpstreamUnavailable(f"upstream {self.url}: {what}: the answer is not JSON") from None

    def _client(self):
        """This client's own connection pool (see the module's docstring), made on first use."""
        import httpx2

        with self._guard:
            if self._http is None:
                connect, read = self._timeouts
                self._http = httpx2.Client(follow_redirects=True, timeout=httpx2.Timeout(read, connect=connect),
                                           limits=httpx2.Limits(max_connections=64, max_keepalive_connections=16))
            return self._http

    def close(self) -> None:
        with self._guard:
            if self._http is not None:
                self._http.close()
                self._http = None

    def _headers(self) -> dict[str, str]:
        from huggingface_hub.utils import build_hf_headers

        # token=False: never the token of whoever runs the server, only the configured upstream one
        return build_hf_headers(token=self._token or False, library_name="kbuild-hub")

    def _error(self, e: Exception, what: str) -> HubError:
        response = getattr(e, "response", None)
        status = getattr(response, "status_code", None)
        reason = " ".join(str(e).split()) or type(e).__name__
        if status == 404:
            error = UpstreamMissing(f"upstream {self.url} has no {what}")
            code = response.headers.get("X-Error-Code") if response is not None else None
            if code in ("RepoNotFound", "RevisionNotFound", "EntryNotFound"):
                error.error_code = code  # as the upstream said: clients map it to their own error classes
            return error
        if status in (401, 403):
            return UpstreamRefused(f"upstream {self.url} refused {what} ({status})",
                                   hint="give this hub a token the upstream accepts: --upstream-token-file")
        return UpstreamUnavailable(f"upstream {self.url} did not answer for {what}: {reason[:200]}")


_RETRY_STATUS = (502, 503, 504)


def _transport_error(e: Exception) -> bool:
    import httpx2

    return isinstance(e, (httpx2.TransportError,))
