"""Read an HTTP hub (the Hugging Face Hub or `kbuild hub serve`) through huggingface_hub's client,
imported only here and only when an HTTP hub is used.

Requests for one cold load: the refs (skipped for a commit), one recursive listing of the commit
(the variants are the folders under `build/`; the chosen one's files and its SSH signature,
`signatures/<variant>/`, kbuild/repo_layout.py, are read from it too), then one GET per file, 8
at a time (no HEAD: the listing gave sizes and blob ids).
"""

from __future__ import annotations

import io
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, cast

from ..budget import ByteBudget, variant_budget
from ..digest import is_bytecode
from ..errors import (
    BadHubContent,
    HubAccessDenied,
    HubRequestFailed,
    HubUnreachable,
    KernelNotFound,
    OversizedDownload,
    RepoNotFound,
    RevisionNotFound,
)
from ..refs import Refs
from ..repo_layout import listed_variants, variant_folder, variant_paths, variant_prefix
from .base import RemoteFile, cache_folder_name, safe_relpath
from .identity import is_kbuild_hub, token_hint, unreachable_hint

if TYPE_CHECKING:
    from huggingface_hub import HfApi

REPO_TYPE = "kernel"
PARALLEL_DOWNLOADS = 8
_TREES_KEPT = 16  # commits whose listing a reader keeps


class HttpHubReader:
    """An HTTP hub, read through huggingface_hub's client (the builder publishes with its own)."""

    local = False

    def __init__(self, endpoint: str, token: str | None = None):
        self.endpoint = endpoint
        self.token = token
        self.key = cache_folder_name("http", endpoint)
        self._api: HfApi | None = None
        self._trees: dict[tuple[str, str], list] = {}  # (repo, commit) -> its listing, oldest first
        self._trees_lock = threading.Lock()

    def describe(self) -> str:
        return f"hub {self.endpoint}"

    @property
    def api(self) -> HfApi:
        if self._api is None:
            from huggingface_hub import HfApi  # deferred: `import kbuild` stays light

            self._api = HfApi(endpoint=self.endpoint, token=self.token, library_name="kbuild")
        return self._api

    def private_hint(self, kbuild_hub: bool = False) -> str:
        """What a 'not found' may mean on a hub that asked for a token (a 401: one that hides private
        repos from whoever it does not know): a missing or weak token."""
        from huggingface_hub import get_token  # HF_TOKEN, else huggingface_hub's token file

        if (self.token or get_token()) is None:
            return f"; if it is private, no token was sent: {token_hint(kbuild_hub, write=False)}"
        return ("; if it is private, the token sent (HF_TOKEN or huggingface_hub's login) cannot read it"
                + (f": {token_hint(True, write=False)}" if kbuild_hub else ""))

    def refs(self, repo_id: str) -> Refs:
        """The one request of a warm load. Made as HfApi.list_repo_refs makes it, through
        huggingface_hub's session, headers and error mapping, but without importing hf_api: that
        import (about 160 ms) was most of a warm load's time."""
        from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status

        with _errors(self, repo_id, "list the branches of"):
            response = get_session().get(f"{self.endpoint}/api/{REPO_TYPE}s/{repo_id}/refs",
                                         headers=build_hf_headers(token=self.token, library_name="kbuild"))
            hf_raise_for_status(response)
        try:
            data = response.json()
            found = [{item["name"]: item["targetCommit"] for item in data[kind]} for kind in ("branches", "tags")]
            if not all(isinstance(v, str) for named in found for pair in named.items() for v in pair):
                raise TypeError("a name or commit is not a string")
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise BadHubContent(f"{self.describe()} answered the refs of {repo_id} with something else than "
                                f"branches and tags ({type(e).__name__}: {e})") from None
        return Refs(*found)

    def tree(self, repo_id: str, commit: str) -> list:
        """Every entry of the repo at `commit`, in one recursive listing (pages followed), kept for
        the next call: choosing a variant and fetching it read the same listing, so a cold load
        makes one listing request where it made three (build/, the variant's folder, its
        signature's). What a commit holds never changes."""
        key = (repo_id, commit)
        with self._trees_lock:
            if key in self._trees:
                return self._trees[key]
        with _errors(self, repo_id, f"list the files at {commit[:12]} of"):
            entries = list(self.api.list_repo_tree(repo_id, recursive=True, revision=commit, repo_type=REPO_TYPE))
        with self._trees_lock:
            self._trees[key] = entries
            while len(self._trees) > _TREES_KEPT:  # a long-lived process loads many commits
                del self._trees[next(iter(self._trees))]
        return entries

    def variants(self, repo_id: str, commit: str) -> list[str]:
        from huggingface_hub.hf_api import RepoFolder

        return listed_variants(e.path for e in self.tree(repo_id, commit) if isinstance(e, RepoFolder))

    def fetch(self, repo_id: str, commit: str, variant: str, dest: Path,
              max_bytes: int | None = None) -> list[RemoteFile]:
        files = self.files(repo_id, commit, variant)
        budget = variant_budget((f.size for f in files), max_bytes,
                                f"{self.describe()}: {repo_id}@{commit[:12]} {variant_folder(variant)}")
        dest = Path(dest)
        with ThreadPoolExecutor(min(PARALLEL_DOWNLOADS, len(files))) as pool:
            list(pool.map(lambda f: self._download(repo_id, commit, f.repo_path, dest / f.path, f.size, budget),
                          files))
        return files

    def read_file(self, repo_id: str, commit: str, path: str) -> bytes:
        buffer = io.BytesIO()
        self._download(repo_id, commit, path, buffer)
        return buffer.getvalue()

    def files(self, repo_id: str, commit: str, variant: str) -> list[RemoteFile]:
        from huggingface_hub.hf_api import RepoFile

        prefix = variant_prefix(variant)
        # variant_paths picks the variant's files (and its signature) out of the whole commit's
        found = {e.path: e for e in self.tree(repo_id, commit) if isinstance(e, RepoFile)}
        files = []
        for path, rel in variant_paths(variant, found).items():
            e = found[path]
            rel = safe_relpath(rel, f"{repo_id}@{commit[:12]}")
            if not is_bytecode(rel):
                lfs = getattr(e, "lfs", None)
                files.append(RemoteFile(rel, e.blob_id, e.size, lfs_sha256=lfs.sha256 if lfs else None,
                                        repo_path=path))
        if not any(f.repo_path.startswith(prefix) for f in files):
            raise KernelNotFound(f"{repo_id}@{commit[:12]} has no files under {prefix} on {self.describe()}")
        return files

    def _download(self, repo_id: str, commit: str, path: str, target: Path | BinaryIO, size: int | None = None,
                  budget: ByteBudget | None = None) -> None:
        """One GET of the file's resolve URL (huggingface_hub's http_get: retries, resumes, follows
        the Hub's redirects to its storage) into a path or a binary file object; every byte is
        counted against the file's listed size and the variant's `budget`."""
        from huggingface_hub import hf_hub_url
        from huggingface_hub.file_download import http_get
        from huggingface_hub.utils import build_hf_headers

        url = hf_hub_url(repo_id, path, repo_type=REPO_TYPE, revision=commit, endpoint=self.endpoint)
        headers = build_hf_headers(token=self.token, library_name="kbuild")
        limit = (size if size is not None else READ_LIMIT) + SIZE_SLACK
        what = f"{self.describe()}: {path} of {repo_id}@{commit[:12]}"
        with _errors(self, repo_id, f"download {path} at {commit[:12]} of"):
            if isinstance(target, Path):
                target.parent.mkdir(parents=True, exist_ok=True)
                with open(target, "wb") as f:
                    http_get(url, _capped(f, limit, what, budget), headers=headers, expected_size=size,
                             displayed_filename=path.rsplit("/", 1)[-1])
            else:
                http_get(url, _capped(target, limit, what), headers=headers, expected_size=size)


def _capped(f: BinaryIO, limit: int, what: str, budget: ByteBudget | None = None) -> BinaryIO:
    # a binary file by delegation (_Capped.__getattr__), which a type checker cannot follow
    return cast(BinaryIO, _Capped(f, limit, what, budget))


class _Capped:
    """A binary file object that refuses to take more than `limit` bytes: a hub that lists a file
    at 110 bytes and streams gigabytes fills no disk (the download stops at the listed size plus
    a small slack; huggingface_hub only compares sizes once everything has been written)."""

    def __init__(self, f: BinaryIO, limit: int, what: str, budget: ByteBudget | None = None):
        self._f, self._limit, self._what, self._written, self._budget = f, limit, what, 0, budget

    def write(self, data) -> int:
        self._written += len(data)
        if self._written > self._limit:
            raise OversizedDownload(f"{self._what}: the hub sent more than the {self._limit - SIZE_SLACK} bytes it "
                                    "listed; download stopped")
        if self._budget is not None:  # the variant's total, shared with its other files' downloads
            self._budget.take(len(data))
        return self._f.write(data)

    def __getattr__(self, name):  # tell, seek, flush, name, ... of the real file
        return getattr(self._f, name)


# A file listed at N bytes may take N + SIZE_SLACK before the download is stopped; files read
# whole (metadata.json, for re-verification) have no listed size and take at most READ_LIMIT.
SIZE_SLACK = 64 * 1024
READ_LIMIT = 16 * 1024 * 1024


class _errors:
    """huggingface_hub's and httpx's failures as the runtime's (kbuild.errors): RepoNotFound,
    RevisionNotFound, KernelNotFound (no such file), HubAccessDenied, HubUnreachable,
    HubRequestFailed; `missing_ok` turns a missing path into `ok=False`."""

    def __init__(self, hub: HttpHubReader, repo_id: str, what: str, missing_ok: bool = False):
        self.hub, self.repo_id, self.what, self.missing_ok, self.ok = hub, repo_id, what, missing_ok, True

    def __enter__(self):
        return self

    def __exit__(self, kind, error, tb):
        if error is None:
            return False
        from huggingface_hub import errors as hf

        where = f"cannot {self.what} {self.repo_id} on {self.hub.describe()}"
        if isinstance(error, hf.RepositoryNotFoundError):
            # a hub asks for a token (401) where a repo may be private; a 404 is a repo that is not there
            response = getattr(error, "response", None)
            asked = getattr(response, "status_code", None) == 401
            hint = self.hub.private_hint(is_kbuild_hub(getattr(response, "headers", None))) if asked else ""
            raise RepoNotFound(f"no kernel repo {self.repo_id} on {self.hub.describe()}{hint}") from None
        if isinstance(error, hf.RevisionNotFoundError):
            raise RevisionNotFound(f"{where}: no such revision") from None
        if isinstance(error, hf.EntryNotFoundError):
            if self.missing_ok:
                self.ok = False
                return True
            raise KernelNotFound(f"{where}: no such file") from None
        if isinstance(error, hf.OfflineModeIsEnabled):
            raise HubUnreachable(f"{where}: huggingface_hub is in offline mode (HF_HUB_OFFLINE)") from None
        if isinstance(error, hf.HfHubHTTPError):
            status = getattr(error.response, "status_code", 0) or 0
            message = str(error).splitlines()[0]
            if status in (401, 403):
                hint = token_hint(is_kbuild_hub(getattr(error.response, "headers", None)), write=False)
                raise HubAccessDenied(f"{where}: {message} ({hint})") from None
            if status >= 500 or status == 429:
                raise HubUnreachable(f"{where}: {message}") from None
            raise HubRequestFailed(f"{where}: {message}") from None
        if is_transport_error(error):
            raise HubUnreachable(f"{where}: {error}; {unreachable_hint('hub=')}") from None
        return False


def is_transport_error(error: BaseException) -> bool:
    """A connection or timeout failure (the builder's publisher asks too)."""
    # httpx (httpx2 in huggingface_hub 2.x) connection and timeout errors, without importing httpx.
    names = {c.__name__ for c in type(error).__mro__}
    return bool(names & {"TransportError", "TimeoutException", "NetworkError"}) or isinstance(
        error, (ConnectionError, TimeoutError))
