"""`kbuild hub serve` against the real clients: huggingface_hub's HfApi and Hugging Face's `kernels`
loader talk to a real server on 127.0.0.1 (uvicorn in a thread) over a real git-backed hub."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
from huggingface_hub import CommitOperationAdd, HfApi, hf_hub_download, snapshot_download
from huggingface_hub.errors import (
    HfHubHTTPError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.hf_api import RepoFile, RepoFolder

from hubserver import TOKEN, ServerThread
from kbuild_hub.errors import HubError
from kbuild_hub.server import listen

BIG = 12 * 1024 * 1024


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    server = ServerThread(tmp_path_factory.mktemp("hub"), max_file_size=64 << 20, trusted=("trusted-org",))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def private_hub(tmp_path_factory):
    server = ServerThread(tmp_path_factory.mktemp("private-hub"), public_read=False, max_file_size=1 << 20)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def api(hub):
    return HfApi(endpoint=hub.url, token=TOKEN)


@pytest.fixture(scope="module")
def published(api, tmp_path_factory):
    """org/flow (kernel): branch v1 with two variants, a nested 12 MB file, benchmarks/."""
    folder = tmp_path_factory.mktemp("upload")
    files = {
        "build/torch-cpu/__init__.py": b"def hello():\n    return 'cpu'\n",
        "build/torch-cpu/metadata.json": b'{"name": "flow"}\n',
        "build/torch-cpu/layers/deep/data.bin": os.urandom(BIG),
        "build/torch-cuda/__init__.py": b"def hello():\n    return 'cuda'\n",
        "benchmarks/bench.py": b"print('bench')\n",
    }
    for path, data in files.items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_bytes(data)
    api.create_repo("org/flow", repo_type="kernel")
    api.create_branch("org/flow", branch="v1", repo_type="kernel")
    info = api.upload_folder(repo_id="org/flow", folder_path=folder, repo_type="kernel", revision="v1",
                             commit_message="publish v1")
    return {"commit": info.oid, "files": files}


def test_a_token_in_the_query_string_is_not_logged(hub):
    hub.raw("GET", "/api/whoami-v2?token=sekrit-123&x=1")
    line = next(entry for entry in reversed(hub.logged()) if "x=1" in entry)
    assert "sekrit" not in line and "token=***" in line and "x=1" in line


def test_a_busy_port_is_a_hub_error():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(HubError, match="cannot listen"):
            listen("127.0.0.1", taken.getsockname()[1])


SERVE = """
import argparse, sys
from builder.commands import hub as serve_cli
from builder.report import Reporter
parser = argparse.ArgumentParser(prog="kbuild")
serve_cli.add_parser(parser.add_subparsers(dest="command"))
args = parser.parse_args(sys.argv[1:])
sys.exit(args.handler(args, Reporter(plain=True)))
"""


def test_hub_serve_command_generates_a_token_and_serves(tmp_path):
    root = tmp_path / "hub"
    child = subprocess.Popen([sys.executable, "-c", SERVE, "hub", "serve", "--root", str(root), "--port", "0"],
                             stderr=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[2])
    try:
        first = child.stderr.readline()
        assert "write token created" in first and str(root / ".token") in first, first
        url = first.split(" on ", 1)[1].split()[0]
        token = (root / ".token").read_text().strip()
        assert stat.S_IMODE((root / ".token").stat().st_mode) == 0o600
        assert HfApi(endpoint=url, token=token).whoami()["name"] == "kbuild"
        with pytest.raises(HfHubHTTPError):
            HfApi(endpoint=url, token="nope").create_repo("org/x", repo_type="kernel")
    finally:
        child.terminate()
        child.wait(10)
        rest = child.stderr.read()
        child.stderr.close()
    assert any(line.startswith("GET /api/whoami-v2 200 ") for line in rest.splitlines())


# -- huggingface_hub against the server -------------------------------------------------------

def test_create_repo_kernel_and_model(api):
    url = api.create_repo("org/made-k", repo_type="kernel")
    assert (url.repo_id, url.repo_type, url.endpoint) == ("org/made-k", "kernel", api.endpoint)
    assert api.create_repo("org/made-k", repo_type="kernel", exist_ok=True).repo_id == "org/made-k"
    with pytest.raises(HfHubHTTPError) as e:
        api.create_repo("org/made-k", repo_type="kernel")
    assert e.value.response.status_code == 409
    assert api.create_repo("org/made-m").repo_type == "model"
    assert api.repo_info("org/made-m").sha == api.list_repo_refs("org/made-m").branches[0].target_commit


def test_refs_tree_and_info(api, published):
    refs = api.list_repo_refs("org/flow", repo_type="kernel")
    assert {b.name: b.target_commit for b in refs.branches}["v1"] == published["commit"]
    files = {f.path: f for f in api.list_repo_tree("org/flow", recursive=True, revision="v1", repo_type="kernel")
             if isinstance(f, RepoFile)}
    assert set(files) == set(published["files"])
    assert files["build/torch-cpu/layers/deep/data.bin"].size == BIG
    variants = list(api.list_repo_tree("org/flow", path_in_repo="build", revision="v1", repo_type="kernel"))
    assert all(isinstance(v, RepoFolder) for v in variants)  # how the kernels loader finds variants
    assert sorted(v.path for v in variants) == ["build/torch-cpu", "build/torch-cuda"]
    info = api.repo_info("org/flow", repo_type="kernel", revision="v1")
    assert info.sha == published["commit"]
    assert {s["rfilename"] for s in info.siblings} == set(published["files"])  # KernelInfo keeps dicts
    assert api.repo_info("org/flow", repo_type="kernel").sha != published["commit"]  # main is the card branch


def test_downloads(api, hub, published, tmp_path):
    path = hf_hub_download("org/flow", "build/torch-cpu/layers/deep/data.bin", repo_type="kernel", revision="v1",
                           endpoint=hub.url, cache_dir=tmp_path / "c1", token=False)
    assert Path(path).read_bytes() == published["files"]["build/torch-cpu/layers/deep/data.bin"]
    snap = Path(snapshot_download("org/flow", repo_type="kernel", revision="v1", endpoint=hub.url,
                                  cache_dir=tmp_path / "c2", allow_patterns=["build/torch-cpu/*"], token=False))
    got = sorted(str(p.relative_to(snap)) for p in snap.rglob("*") if p.is_file())
    assert got == sorted(p for p in published["files"] if p.startswith("build/torch-cpu/"))
    assert snap.name == published["commit"]


def test_resolve_headers_and_ranges(hub, published):
    url = "/kernels/org/flow/resolve/refs%2Fheads%2Fv1/build/torch-cpu/__init__.py"
    status, headers, body = hub.raw("HEAD", url)
    data = published["files"]["build/torch-cpu/__init__.py"]
    assert status == 200 and body == b""
    assert headers["x-repo-commit"] == published["commit"]
    assert headers["etag"].startswith('"') and len(headers["etag"]) == 42
    assert (headers["content-length"], headers["accept-ranges"]) == (str(len(data)), "bytes")
    status, headers, body = hub.raw("GET", url, headers={"Range": "bytes=4-9"})
    assert (status, body, headers["content-range"]) == (206, data[4:10], f"bytes 4-9/{len(data)}")
    status, headers, _ = hub.raw("GET", url, headers={"Range": "bytes=999-"})
    assert status == 416
    status, _, body = hub.raw("GET", "/api/kernels/org/flow/tree/refs%2Fheads%2Fv1/build")
    assert status == 200 and {e["type"] for e in json.loads(body)} == {"directory"}


def test_branches_and_whoami(api, published):
    api.create_branch("org/flow", branch="tmp", revision="v1", repo_type="kernel")
    refs = {b.name: b.target_commit for b in api.list_repo_refs("org/flow", repo_type="kernel").branches}
    assert refs["tmp"] == published["commit"]
    with pytest.raises(HfHubHTTPError) as e:
        api.create_branch("org/flow", branch="tmp", repo_type="kernel")
    assert e.value.response.status_code == 409
    api.create_branch("org/flow", branch="tmp", repo_type="kernel", exist_ok=True)
    api.delete_branch("org/flow", branch="tmp", repo_type="kernel")
    assert "tmp" not in {b.name for b in api.list_repo_refs("org/flow", repo_type="kernel").branches}
    me = api.whoami()
    assert me["name"] == "kbuild" and "org" in {o["name"] for o in me["orgs"]}


def test_private_hub_denies_anonymous_reads(private_hub):
    HfApi(endpoint=private_hub.url, token=TOKEN).create_repo("org/secret", repo_type="kernel")
    with pytest.raises(RepositoryNotFoundError):
        HfApi(endpoint=private_hub.url, token=False).list_repo_refs("org/secret", repo_type="kernel")
    status, _, _ = private_hub.raw("GET", "/kernels/org/secret/resolve/main/README.md")
    assert status == 401
    assert HfApi(endpoint=private_hub.url, token=TOKEN).list_repo_refs("org/secret", repo_type="kernel").branches


def test_files_over_the_limit_are_refused(private_hub):
    api = HfApi(endpoint=private_hub.url, token=TOKEN)
    api.create_repo("org/limits", repo_type="kernel")
    with pytest.raises(HfHubHTTPError) as e:
        api.upload_file(path_or_fileobj=b"x" * (2 << 20), path_in_repo="big.bin", repo_id="org/limits",
                        repo_type="kernel")
    assert e.value.response.status_code == 413
    header = json.dumps({"key": "header", "value": {"summary": "big"}}).encode()
    line = json.dumps({"key": "file", "value": {"path": "big.bin", "encoding": "base64",
                                                "content": "QUFB" * (700 << 10)}}).encode()
    status, headers, _ = private_hub.raw("POST", "/api/kernels/org/limits/commit/main", header + b"\n" + line,
                                         {"Authorization": f"Bearer {TOKEN}"})
    assert status == 413


def test_unknown_revision_and_repo(api, hub, published, tmp_path):
    with pytest.raises(RevisionNotFoundError):
        api.repo_info("org/flow", repo_type="kernel", revision="v99")
    with pytest.raises(RevisionNotFoundError):
        hf_hub_download("org/flow", "build/torch-cpu/__init__.py", repo_type="kernel", revision="v99",
                        endpoint=hub.url, cache_dir=tmp_path, token=False)
    with pytest.raises(RepositoryNotFoundError):
        api.list_repo_refs("org/missing", repo_type="kernel")
    with pytest.raises(RepositoryNotFoundError):
        hf_hub_download("org/missing", "x.py", repo_type="kernel", endpoint=hub.url, cache_dir=tmp_path,
                        token=False)


@pytest.mark.parametrize("path", [
    "/kernels/org/flow/resolve/v1/../../../../etc/passwd",
    "/kernels/org/flow/resolve/v1/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
    "/kernels/org/flow/resolve/v1/build/..%2F..%2F..%2Fetc%2Fpasswd",
    "/kernels/org/flow/resolve/v1/build%5C..%5C..%5Cconfig",
    "/kernels/org/flow/resolve/v1/build/a%00b",
    "/kernels/org/flow/resolve/v1/%2Fetc%2Fpasswd",
    "/kernels/org/flow/resolve/v1/.git/config",
    "/api/kernels/org/flow/tree/v1/..%2F..%2F..",
    "/api/kernels/org/%2e%2e/refs",
    "/api/kernels/org/flow/tree/..%2F..%2Fetc",
])
def test_traversal_is_a_400(hub, published, path):
    status, headers, body = hub.raw("GET", path)
    assert status == 400, (path, status, body)
    assert "root:" not in body.decode(errors="replace")


def test_traversal_in_uploads_is_a_400(hub, published):
    auth = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"}
    body = json.dumps({"files": [{"path": "../escape.py", "size": 1, "sample": ""}]}).encode()
    assert hub.raw("POST", "/api/kernels/org/flow/preupload/v1", body, auth)[0] == 400
    lines = [{"key": "header", "value": {"summary": "evil"}},
             {"key": "file", "value": {"path": "build/../../escape.py", "encoding": "base64", "content": "eA=="}}]
    payload = b"".join(json.dumps(x).encode() + b"\n" for x in lines)
    assert hub.raw("POST", "/api/kernels/org/flow/commit/v1", payload, auth)[0] == 400


def test_parent_commit_conflict_and_pinned_download(api, hub, tmp_path):
    # A model repo: its resolve URLs carry no type prefix.
    api.create_repo("org/moving")
    first = api.upload_file(path_or_fileobj=b"one", path_in_repo="f.txt", repo_id="org/moving").oid
    api.upload_file(path_or_fileobj=b"two", path_in_repo="f.txt", repo_id="org/moving")
    with pytest.raises(HfHubHTTPError) as e:
        api.create_commit("org/moving", [CommitOperationAdd("g.txt", b"late")], commit_message="stale",
                          parent_commit=first)
    assert e.value.response.status_code == 409
    old = hf_hub_download("org/moving", "f.txt", revision=first, endpoint=hub.url, cache_dir=tmp_path, token=False)
    assert Path(old).read_bytes() == b"one"
    new = hf_hub_download("org/moving", "f.txt", endpoint=hub.url, cache_dir=tmp_path, token=False)
    assert Path(new).read_bytes() == b"two"
    with pytest.raises(HfHubHTTPError) as e:
        api.upload_file(path_or_fileobj=b"x", path_in_repo="x.txt", repo_id="org/moving", create_pr=True)
    assert e.value.response.status_code == 400  # no pull requests here


def test_parallel_uploads_to_one_branch_both_land(api):
    """Parallel CI jobs each publish their own variant to the same branch."""
    api.create_repo("org/par", repo_type="kernel")
    api.create_branch("org/par", branch="v1", repo_type="kernel")
    errors = []

    def publish(variant: str) -> None:
        try:
            ops = [CommitOperationAdd(f"build/{variant}/f{i}.py", f"# {variant} {i}\n".encode()) for i in range(5)]
            api.create_commit("org/par", ops, commit_message=variant, revision="v1", repo_type="kernel")
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=publish, args=(f"torch-{b}",)) for b in ("cpu", "cuda", "xpu", "metal")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    tree = api.list_repo_tree("org/par", path_in_repo="build", revision="v1", repo_type="kernel")
    assert sorted(e.path for e in tree) == ["build/torch-cpu", "build/torch-cuda", "build/torch-metal", "build/torch-xpu"]


def test_card_on_main(api, hub, tmp_path):
    api.create_repo("org/carded", repo_type="kernel")
    card = b"---\nlibrary_name: kernels\nlicense: apache-2.0\n---\n# carded\n"
    api.upload_file(path_or_fileobj=card, path_in_repo="README.md", repo_id="org/carded", repo_type="kernel")
    path = hf_hub_download("org/carded", "README.md", repo_type="kernel", endpoint=hub.url, cache_dir=tmp_path,
                           token=False)
    assert Path(path).read_bytes() == card


def test_one_log_line_per_request(hub, published):
    before = len(hub.logged())
    hub.raw("GET", "/api/kernels/org/flow/refs")
    hub.raw("GET", "/api/kernels/org/no-such-repo/refs")
    line, missing = hub.logged(before)
    assert line.startswith("GET /api/kernels/org/flow/refs 200 ") and line.endswith("ms")
    assert missing.startswith("GET /api/kernels/org/no-such-repo/refs 404 ")


def test_snapshot_of_a_20mb_file_cold(api, hub, tmp_path):
    api.create_repo("org/big", repo_type="kernel")
    api.create_branch("org/big", branch="v1", repo_type="kernel")
    data = os.urandom(20 << 20)
    api.upload_file(path_or_fileobj=data, path_in_repo="build/torch-cpu/big.bin", repo_id="org/big",
                    repo_type="kernel", revision="v1")
    started = time.perf_counter()
    snap = snapshot_download("org/big", repo_type="kernel", revision="v1", endpoint=hub.url, token=False,
                             cache_dir=tmp_path, allow_patterns=["build/torch-cpu/*"])
    seconds = time.perf_counter() - started
    assert (Path(snap) / "build/torch-cpu/big.bin").read_bytes() == data
    print(f"snapshot_download of 20 MB, cold: {seconds:.2f}s")
    assert seconds < 20


# -- Hugging Face's kernels loader against the server -----------------------------------------

TINY_INIT = "def add_one(x):\n    return x + 1\n"
TINY_METADATA = {"name": "tiny", "id": "_tiny_universal_abc1234", "version": 1, "license": "Apache-2.0",
                 "python-depends": [], "backend": {"type": "cpu"}}


def test_kernels_get_kernel_loads_from_the_server(api, hub, tmp_path):
    variant = tmp_path / "upload" / "build" / "torch-universal"
    variant.mkdir(parents=True)
    (variant / "__init__.py").write_text(TINY_INIT)
    (variant / "metadata.json").write_text(json.dumps(TINY_METADATA))
    api.create_repo("org/tiny", repo_type="kernel")
    api.create_branch("org/tiny", branch="v1", repo_type="kernel")
    api.upload_folder(repo_id="org/tiny", folder_path=tmp_path / "upload", repo_type="kernel", revision="v1")
    script = textwrap.dedent("""
        import kernels
        tiny = kernels.get_kernel("org/tiny", version=1, trust_remote_code=True)
        print("RESULT", tiny.add_one(41))
    """)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING", "KERNELS_"))}
    # No HF_HUB_DISABLE_TELEMETRY here: with it, kernels 0.17.2 sends a User-Agent ending in "; ",
    # which httpx refuses before any request leaves.
    env.update(HF_ENDPOINT=hub.url, HF_HOME=str(tmp_path / "hf-home"))
    before = len(hub.logged())
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "RESULT 42" in done.stdout
    requests = hub.logged(before)
    assert any("/api/kernels/org/tiny/refs" in r for r in requests)
    assert any("/kernels/org/tiny/resolve/" in r and "torch-universal/__init__.py" in r for r in requests)


# -- paths-info and body limits (issue 10, finding 7) -----------------------------------------------

def test_paths_info_answers_many_paths_in_one_git_call(hub, api, published, monkeypatch):
    from kbuild_hub.gitstore import GitStore

    wanted = ["build/torch-cpu/__init__.py", "build/torch-cpu/layers", "build/nope.py"] + \
        [f"missing/{i}.py" for i in range(2000)]
    infos = api.get_paths_info("org/flow", wanted, revision="v1", repo_type="kernel")
    assert sorted((i.path, type(i).__name__) for i in infos) == [
        ("build/torch-cpu/__init__.py", "RepoFile"), ("build/torch-cpu/layers", "RepoFolder")]
    calls = []
    real = GitStore._git
    monkeypatch.setattr(GitStore, "_git", lambda self, repo, *a, **k: calls.append(a[0]) or real(self, repo, *a, **k))
    status, _, body = hub.raw("POST", "/api/kernels/org/flow/paths-info/v1",
                              body="&".join(f"paths={p}" for p in wanted).encode(),
                              headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert status == 200 and len(json.loads(body)) == 2
    assert calls.count("cat-file") <= 2 and len(calls) <= 4, calls  # was one git process per path


def test_read_route_bodies_are_capped_before_they_are_read(hub, published):
    big = b"paths=" + b"a" * (2 << 20)
    status, headers, _ = hub.raw("POST", "/api/kernels/org/flow/paths-info/v1", body=big,
                                 headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert status == 413 and "limit of 1048576 bytes" in headers["x-error-message"]
    many = "&".join(f"paths=p{i}" for i in range(10_001)).encode()
    status, headers, _ = hub.raw("POST", "/api/kernels/org/flow/paths-info/v1", body=many,
                                 headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert status == 400 and "at most 10000 per request" in headers["x-error-message"]


def test_a_revision_ending_in_a_newline_and_a_branch_named_like_a_ref_are_refused(hub, api, published):
    """Issue 10, finding 10: `$` in a validation pattern matches before a trailing newline."""
    sha = published["commit"]
    status, _, _ = hub.raw("GET", f"/api/kernels/org/flow/revision/{sha}%0A")
    assert status == 400
    status, _, _ = hub.raw("GET", f"/api/kernels/org/flow/revision/{sha}")
    assert status == 200
    for name in ("refs/tags/x", "refs/heads/refs/tags/x"):
        with pytest.raises(HfHubHTTPError, match="invalid branch name"):
            api.create_branch("org/flow", branch=name, repo_type="kernel")
    from kbuild.cache import KernelCache

    with pytest.raises(ValueError, match="not a hex object id"):  # a hub naming such a commit
        KernelCache(Path("/nonexistent")).commit_dir("hub", "org/flow", f"{sha}\n")


# -- the server's answers over HTTP ------------------------------------------------------------

def test_writes_need_the_token(hub, published):
    with pytest.raises(HfHubHTTPError) as e:
        HfApi(endpoint=hub.url, token=False).create_branch("org/flow", branch="x", repo_type="kernel")
    assert e.value.response.status_code == 401
    with pytest.raises(HfHubHTTPError) as e:
        HfApi(endpoint=hub.url, token="wrong").create_repo("org/other", repo_type="kernel")
    assert e.value.response.status_code == 403
    with pytest.raises(HfHubHTTPError) as e:
        HfApi(endpoint=hub.url, token="wrong").upload_file(path_or_fileobj=b"x", path_in_repo="x.txt",
                                                           repo_id="org/flow", repo_type="kernel")
    assert e.value.response.status_code == 403


def test_trust_overview(api):
    assert api.get_organization_overview("trusted-org").trustedKernelPublisher is True
    assert api.get_organization_overview("org").trustedKernelPublisher is False


def test_agent_harness_registry_is_empty_so_clients_cache_it(hub):
    status, _, body = hub.raw("GET", "/api/agent-harnesses")
    assert status == 200 and json.loads(body) == {"standardEnvVars": [], "harnesses": {}}


def _ndjson_body(*lines) -> bytes:
    return b"\n".join(json.dumps(line).encode() for line in lines)


@pytest.mark.parametrize("route, body", [
    ("/api/repos/create", b"[" * 100_000 + b"]" * 100_000),
    ("/api/kernels/org/flow/commit/v1", b"[" * 100_000),
    ("/api/kernels/org/flow/commit/v1", _ndjson_body({"key": "header", "value": {"summary": "a\0b"}},
                                               {"key": "deletedFile", "value": {"path": "x"}})),
    ("/api/kernels/org/flow/commit/v1", _ndjson_body({"key": "header", "value": {"summary": 5}})),
    ("/api/kernels/org/flow/commit/v1", _ndjson_body({"key": "header", "value": {"summary": "s", "parentCommit": [1]}})),
], ids=["deep-json", "deep-ndjson", "nul-summary", "int-summary", "list-parent"])
def test_malformed_bodies_get_400_not_500(hub, published, route, body):
    """Issue 10, finding 10: deep nesting, wrong types and NUL in a summary were 500s."""
    kind = "application/json" if "create" in route else "application/x-ndjson"
    status, headers, _ = hub.raw("POST", route, body, {"Authorization": f"Bearer {TOKEN}", "Content-Type": kind})
    assert status == 400, headers.get("x-error-message")
