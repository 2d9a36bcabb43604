"""Publishing to an HTTP hub (the Hugging Face Hub or `kbuild hub serve`), only through
huggingface_hub's client."""

from __future__ import annotations

from packaging.version import Version

from builder.hub.backend import REPO_TYPE, RemoteFile, Upload
from kbuild.hubs.http import is_transport_error
from kbuild.hubs.identity import is_kbuild_hub, page_url, token_hint, unreachable_hint
from kbuild_common.errors import ToolchainError
from kbuild_hub.errors import HubError, RefConflict

# huggingface_hub reads kernel repos since 1.x but commits to them only since 2.3 (before, its
# create_commit refuses repo_type="kernel"); pyproject's `build` extra asks for this release.
KERNEL_COMMITS_SINCE = "2.3"


class HttpHubBackend:
    """The publisher's HubBackend for an HTTP hub (the runtime reads one with kbuild.hubs.http.HttpHubReader)."""

    def __init__(self, endpoint: str, token: str | None):
        from huggingface_hub import HfApi  # deferred: only publishing to HTTP needs it

        self.endpoint = endpoint
        self.api = HfApi(endpoint=endpoint, token=token)

    def describe(self) -> str:
        return f"hub {self.endpoint}"

    def require_writes(self) -> None:
        """Refuse, before anything is written, a huggingface_hub that cannot commit to a kernel repo."""
        import huggingface_hub

        installed = huggingface_hub.__version__
        if Version(installed) < Version(KERNEL_COMMITS_SINCE):
            raise ToolchainError(
                f"publishing to {self.endpoint} needs huggingface_hub >= {KERNEL_COMMITS_SINCE} (kernel repos), "
                f"this Python has {installed}",
                hint=f"pip install 'huggingface_hub>={KERNEL_COMMITS_SINCE}' (transformers older than 5.21 pins "
                     "it below 2.0: publish from another environment, or to the hub's folder)")

    def ensure_repo(self, repo_id: str) -> None:
        self.require_writes()
        # Not create_repo(exist_ok=True): on a 401/403 for a repo that exists it builds a RepoUrl,
        # which raises HfUriError for any host but huggingface.co (a traceback, not "set HF_TOKEN").
        with _errors(self.endpoint, f"look up {repo_id}"):
            if self.api.repo_exists(repo_id, repo_type=REPO_TYPE):
                return
        try:
            with _errors(self.endpoint, f"create {repo_id}"):
                self.api.create_repo(repo_id, repo_type=REPO_TYPE)
        except RefConflict:  # 409: a parallel publisher created it meanwhile
            pass

    def head(self, repo_id: str, branch: str) -> str | None:
        with _errors(self.endpoint, f"list the branches of {repo_id}"):
            refs = self.api.list_repo_refs(repo_id, repo_type=REPO_TYPE)
        return next((b.target_commit for b in refs.branches if b.name == branch), None)

    def files(self, repo_id: str, commit: str, prefix: str) -> dict[str, RemoteFile]:
        from huggingface_hub.errors import EntryNotFoundError
        from huggingface_hub.hf_api import RepoFile

        try:
            with _errors(self.endpoint, f"list {repo_id}@{commit[:12]}/{prefix}", passthrough=(EntryNotFoundError,)):
                entries = list(self.api.list_repo_tree(repo_id, prefix, recursive=True, revision=commit,
                                                       repo_type=REPO_TYPE))
        except EntryNotFoundError:
            return {}
        return {e.path: RemoteFile(e.path, e.blob_id, e.size) for e in entries if isinstance(e, RepoFile)}

    def read(self, repo_id: str, commit: str, path: str) -> bytes:
        from huggingface_hub import hf_hub_download

        with _errors(self.endpoint, f"download {repo_id}@{commit[:12]}/{path}"):
            local = hf_hub_download(repo_id, path, revision=commit, repo_type=REPO_TYPE,
                                    endpoint=self.endpoint, token=self.api.token)
        with open(local, "rb") as f:
            return f.read()

    def commit(self, repo_id: str, branch: str, *, uploads: list[Upload], deletes: list[str], message: str,
               parent: str | None) -> str:
        from huggingface_hub import CommitOperationAdd, CommitOperationDelete

        self.require_writes()
        if parent is None:
            with _errors(self.endpoint, f"create branch {branch} of {repo_id}"):
                self.api.create_branch(repo_id, branch=branch, repo_type=REPO_TYPE, exist_ok=True)
            parent = self.head(repo_id, branch)
        operations: list[CommitOperationAdd | CommitOperationDelete] = [
            CommitOperationAdd(u.path, str(u.source)) for u in uploads]
        operations += [CommitOperationDelete(path) for path in deletes]
        with _errors(self.endpoint, f"commit to {repo_id}@{branch}"):
            info = self.api.create_commit(repo_id, operations, commit_message=message, revision=branch,
                                          parent_commit=parent, repo_type=REPO_TYPE)
        return info.oid

    def url(self, repo_id: str, revision: str) -> str:
        """The repo's page, where it is on this hub (kbuild's hub and the Hugging Face Hub differ):
        which hub this is, its answer to a read of the repo's refs says (kbuild/hubs/identity.py)."""
        from huggingface_hub.utils import build_hf_headers, get_session

        try:
            response = get_session().get(f"{self.endpoint}/api/{REPO_TYPE}s/{repo_id}/refs",
                                          headers=build_hf_headers(token=self.api.token))
            kbuild_hub = is_kbuild_hub(response.headers)
        except Exception as e:  # noqa: BLE001 - a link is not worth failing a publish that succeeded

            if not is_transport_error(e):
                raise
            kbuild_hub = False
        return page_url(self.endpoint, repo_id, revision, kbuild_hub)


class _errors:
    """Turn huggingface_hub's HTTP errors into one-line hub errors (409 → RefConflict)."""

    def __init__(self, endpoint: str, what: str, passthrough: tuple = ()):
        self.endpoint, self.what, self.passthrough = endpoint, what, passthrough

    def __enter__(self):
        return self

    def __exit__(self, kind, error, tb):
        from huggingface_hub.errors import HfHubHTTPError

        if error is None or isinstance(error, self.passthrough):
            return False
        if isinstance(error, HfHubHTTPError):
            status = getattr(error.response, "status_code", None)
            message = str(error).splitlines()[0]
            if status == 409:
                raise RefConflict(f"cannot {self.what}: {message}") from None
            if status in (401, 403):
                kbuild_hub = is_kbuild_hub(getattr(error.response, "headers", None))
                if kbuild_hub:  # its own words are a bare "401 Unauthorized"
                    message = (f"{self.endpoint} (kbuild hub serve) takes writes only with one of its tokens, and "
                               + ("no token was sent" if status == 401 else "the token sent (HF_TOKEN or "
                                  "huggingface_hub's login) is not one of them"))
                raise HubError(f"cannot {self.what}: {message}", hint=token_hint(kbuild_hub)) from None
            raise HubError(f"cannot {self.what}: {message}") from None

        # a hub that does not answer: httpx's connection errors are not OSErrors
        if isinstance(error, OSError) or is_transport_error(error):
            raise HubError(f"cannot {self.what}: no answer from the hub at {self.endpoint} ({error})",
                           hint=unreachable_hint()) from None
        return False
