"""Every request to the upstream hub, through huggingface_hub's HTTP client (its session, headers,
retries and error mapping), with per-phase timeouts.

The upstream sees only the upstream token (`--upstream-token-file`), never a client's: a client's
token is for this hub. Nothing here writes to the upstream.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator
from urllib.parse import quote

from kbuild_hub.errors import HubError

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
        """Every entry (files and folders) at `commit`, following the upstream's pages."""
        from huggingface_hub.utils import paginate

        path = f"{self.url}/api/{API_WORDS[repo_type]}/{repo_id}/tree/{commit}"
        try:
            return [e for e in paginate(path, params={"recursive": "true", "expand": "false"},
                                        headers=self._headers(), timeout=self._timeout())
                    if isinstance(e, dict)]
        except Exception as e:
            raise self._error(e, f"{repo_type} {repo_id}@{commit[:12]}") from None

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
        """The file's bytes, as they arrive. Redirects to a storage host (LFS, Xet) are followed
        without this hub's token (huggingface_hub's client drops it off the Hub)."""
        from huggingface_hub.utils import hf_raise_for_status, http_stream_backoff

        url = f"{self.url}/{URL_PREFIXES[repo_type]}{repo_id}/resolve/{commit}/{quote(path)}"
        what = f"{repo_id}@{commit[:12]}:{path}"
        try:
            with http_stream_backoff("GET", url, headers=self._headers(), timeout=self._timeout(),
                                     follow_redirects=True, max_retries=self._retries) as response:
                hf_raise_for_status(response)
                yield response.iter_bytes(CHUNK)
        except HubError:
            raise
        except Exception as e:
            raise self._error(e, what) from None

    # -- plumbing ------------------------------------------------------------------------------

    def _json(self, path: str, *, what: str) -> Any:
        from huggingface_hub.utils import hf_raise_for_status, http_backoff

        try:
            # no retry: a ref asked of an upstream that is down is answered as last seen, at once
            response = http_backoff("GET", self.url + path, headers=self._headers(), timeout=self._timeout(),
                                    max_retries=0)
            hf_raise_for_status(response)
            return response.json()
        except Exception as e:
            raise self._error(e, what) from None

    def _headers(self) -> dict[str, str]:
        from huggingface_hub.utils import build_hf_headers

        # token=False: never the token of whoever runs the server, only the configured upstream one
        return build_hf_headers(token=self._token or False, library_name="kbuild-hub")

    def _timeout(self):
        import httpx2

        connect, read = self._timeouts
        return httpx2.Timeout(read, connect=connect)

    def _error(self, e: Exception, what: str) -> HubError:
        status = getattr(getattr(e, "response", None), "status_code", None)
        reason = " ".join(str(e).split()) or type(e).__name__
        if status == 404:
            return UpstreamMissing(f"upstream {self.url} has no {what}")
        if status in (401, 403):
            return UpstreamRefused(f"upstream {self.url} refused {what} ({status})",
                                   hint="give this hub a token the upstream accepts: --upstream-token-file")
        if isinstance(e, ValueError) and status is None and "JSON" in type(e).__name__ + reason:
            return UpstreamUnavailable(f"upstream {self.url}: {what}: the answer is not JSON")
        return UpstreamUnavailable(f"upstream {self.url} did not answer for {what}: {reason[:200]}")
