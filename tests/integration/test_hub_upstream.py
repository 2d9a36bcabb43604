"""`kbuild hub serve --upstream`: a real front hub on 127.0.0.1 before a real upstream hub on
127.0.0.1, both the real app; clients are huggingface_hub and kbuild's own loader. The upstream
holds a kernel (published with the real `kbuild publish`) and a small model repo."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from huggingface_hub import HfApi, snapshot_download
from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError

from hubserver import TOKEN, ServerThread
from kbuild import get_kernel
from kbuild.digest import git_blob_oid
from kbuild_hub.server import Upstream
from kbuild_hub.upstream.policy import UpstreamPolicy
from runtime_hubs import Kernel, new_process, runtime_env, torch_probes  # noqa: F401 (fixtures)
from ssh_signers import allowed_signers, keygen

WEIGHTS = os.urandom(3 << 20)


@pytest.fixture(scope="module")
def signers(tmp_path_factory) -> Path:
    """The allowed_signers file that trusts the key org/tiny v1 is signed with."""
    folder = tmp_path_factory.mktemp("signers")
    return allowed_signers(folder / "org.allowed_signers", **{"alice@example.com": keygen(folder, "alice")})


@pytest.fixture(scope="module")
def upstream(tmp_path_factory, signers):
    """The upstream: org/tiny v1 (kbuild publish --sign), models/org/small-model (config + 3 MB of weights)."""
    root = tmp_path_factory.mktemp("upstream")
    kernel = Kernel(tmp_path_factory.mktemp("tiny")).write(backends=("cpu",)).build()
    kernel.publish(root, "--sign", "--sign-key", str(signers.parent / "alice"))
    server = ServerThread(root, trusted=("org",))
    api = HfApi(endpoint=server.url, token=TOKEN)
    api.create_repo("org/small-model")
    folder = tmp_path_factory.mktemp("model")
    (folder / "config.json").write_text(json.dumps({"model_type": "tiny", "hidden_size": 8}))
    (folder / "weights.bin").write_bytes(WEIGHTS)
    api.upload_folder(repo_id="org/small-model", folder_path=folder)
    yield server, kernel
    server.stop()


def front(tmp_path: Path, upstream_url: str, **policy) -> ServerThread:
    return ServerThread(tmp_path / "front", upstream=Upstream(upstream_url, connect_timeout=2, read_timeout=5),
                        policy=UpstreamPolicy(**policy))


def upstream_gets(server: ServerThread, since: int, what: str) -> list[str]:
    return [line for line in server.logged(since) if line.startswith("GET ") and what in line]


def test_kbuild_loads_through_the_front_by_version_and_by_sha(upstream, signers, tmp_path, runtime_env,  # noqa: F811
                                                              monkeypatch):
    up, _ = upstream
    # org's signature rule, for the front (it checks a variant before keeping it) and for the loader
    monkeypatch.setenv("KBUILD_REQUIRE_SIGNATURE", "org")
    monkeypatch.setenv("KBUILD_ALLOWED_SIGNERS", f"org={signers}")
    hub = front(tmp_path, up.url)
    try:
        module = get_kernel("org/tiny@v1", hub=hub.url, trust_remote_code=True)
        assert module.double(3) == 6
        # the front fetched the signature (signatures/torch-cpu/) with its variant, and checked it
        status, _, page = hub.raw("GET", "/org/tiny")
        assert status == 200 and b"signed by alice@example.com" in page
        refs = {b.name: b.target_commit for b in HfApi(endpoint=up.url).list_repo_refs("org/tiny", repo_type="kernel").branches}
        sha = refs["v1"]
        # the front answers with the upstream's commit ids
        assert HfApi(endpoint=hub.url).kernel_info("org/tiny", revision="v1").sha == sha
        new_process()
        assert get_kernel(f"org/tiny@{sha}", hub=hub.url, trust_remote_code=True).double(2) == 4
    finally:
        hub.stop()


def test_a_model_through_the_front_then_with_the_upstream_down(upstream, tmp_path):
    up, _ = upstream
    hub = front(tmp_path, up.url)
    # the front keeps what it fetched: the same load from a fresh client cache, with the upstream
    # unreachable (a second front on the same folder, pointed at a closed port)
    closed = ServerThread(tmp_path / "front", upstream=Upstream("http://127.0.0.1:9", connect_timeout=1, read_timeout=1))
    try:
        first = snapshot_download("org/small-model", endpoint=hub.url, cache_dir=tmp_path / "c1", token=False)
        assert (Path(first) / "weights.bin").read_bytes() == WEIGHTS
        again = snapshot_download("org/small-model", endpoint=closed.url, cache_dir=tmp_path / "c2", token=False)
        assert (Path(again) / "weights.bin").read_bytes() == WEIGHTS
        status, headers, _ = closed.raw("GET", "/api/models/org/small-model/revision/main")
        assert status == 200 and "last seen" in headers["x-kbuild-upstream-stale"]
        # what was never fetched: one clear error naming the upstream
        status, headers, body = closed.raw("GET", "/api/models/org/other/revision/main")
        assert status == 504 and "never fetched" in body.decode() and "127.0.0.1:9" in body.decode()
    finally:
        closed.stop()
        hub.stop()


def test_fifty_clients_on_one_uncached_file_make_one_upstream_request(upstream, tmp_path):
    up, _ = upstream
    hub = front(tmp_path, up.url)
    try:
        commit = HfApi(endpoint=hub.url).model_info("org/small-model").sha
        mark = len(up.logged())
        results, errors = [], []

        def fetch(i):
            try:
                status, _, body = hub.raw("GET", f"/org/small-model/resolve/{commit}/weights.bin")
                results.append((status, body == WEIGHTS))
            except Exception as e:  # reported below
                errors.append(e)
        threads = [threading.Thread(target=fetch, args=(i,)) for i in range(50)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not errors and results == [(200, True)] * 50
        assert len(upstream_gets(up, mark, "weights.bin")) == 1
        # a range of the now cached file, as huggingface_hub resumes
        status, headers, body = hub.raw("GET", f"/org/small-model/resolve/{commit}/weights.bin",
                                        headers={"Range": "bytes=100-199"})
        assert status == 206 and body == WEIGHTS[100:200]
    finally:
        hub.stop()


def test_a_local_org_never_falls_through_and_shadowing_is_refused(upstream, tmp_path):
    up, kernel = upstream
    hub = front(tmp_path, up.url)
    api = HfApi(endpoint=hub.url, token=TOKEN)
    try:
        api.create_repo("team/own", repo_type="kernel")
        # the upstream has org/tiny: a local repo of that name would hide it
        with pytest.raises(HfHubHTTPError, match="upstream .* has a repo of that name"):
            api.create_repo("org/tiny", repo_type="kernel")
        # team is this hub's: team/tiny is not looked up upstream, even if the upstream had it
        with pytest.raises(RepositoryNotFoundError, match="not looked up upstream"):
            HfApi(endpoint=hub.url).list_repo_refs("team/tiny", repo_type="kernel")
        # the upstream's org card (trust flag included) is passed through
        status, _, body = hub.raw("GET", "/api/organizations/org/overview")
        assert status == 200 and json.loads(body)["trustedKernelPublisher"] is True
    finally:
        hub.stop()


def test_a_variant_that_fails_its_digest_is_refused_and_never_kept(upstream, tmp_path, runtime_env):  # noqa: F811
    up, kernel = upstream
    # another repo on the upstream whose variant was changed after it was digested
    variant = kernel.variant("torch-cpu")
    bad = tmp_path / "bad" / "torch-cpu"
    bad.parent.mkdir()
    shutil.copytree(variant, bad)
    (bad / "__init__.py").write_text((bad / "__init__.py").read_text() + "\nimport os  # changed\n")
    api = HfApi(endpoint=up.url, token=TOKEN)
    api.create_repo("org/tampered", repo_type="kernel")
    api.create_branch("org/tampered", repo_type="kernel", branch="v1")
    api.upload_folder(repo_id="org/tampered", repo_type="kernel", folder_path=bad, path_in_repo="build/torch-cpu",
                      revision="v1")
    hub = front(tmp_path, up.url)
    closed = ServerThread(tmp_path / "front", upstream=Upstream("http://127.0.0.1:9", connect_timeout=1, read_timeout=1))
    try:
        commit = HfApi(endpoint=hub.url).kernel_info("org/tampered", revision="v1").sha
        status, _, body = hub.raw("GET", f"/kernels/org/tampered/resolve/{commit}/build/torch-cpu/metadata.json")
        assert status == 403
        assert "org/tampered" in body.decode() and commit in body.decode() and "__init__.py" in body.decode()
        blobs = tmp_path / "front" / ".upstream" / "blobs"
        kept = {p.name for p in blobs.rglob("*") if p.is_file()} if blobs.is_dir() else set()
        assert git_blob_oid(bad / "__init__.py") not in kept and git_blob_oid(bad / "metadata.json") not in kept
        # with the upstream down, still refused, never served
        status, _, body = closed.raw("GET", f"/kernels/org/tampered/resolve/{commit}/build/torch-cpu/__init__.py")
        assert status == 403 and b"does not match" in body
    finally:
        closed.stop()
        hub.stop()


def test_the_pages_show_an_upstream_repo_as_mirrored_with_its_upstream_and_commit(upstream, tmp_path, runtime_env):  # noqa: F811
    up, _ = upstream
    hub = front(tmp_path, up.url)
    try:
        assert get_kernel("org/tiny@v1", hub=hub.url, trust_remote_code=True).double(1) == 2
        commit = HfApi(endpoint=up.url).kernel_info("org/tiny", revision="v1").sha
        mark = len(up.logged())
        status, _, body = hub.raw("GET", "/")
        index = body.decode()
        assert status == 200 and "mirrored from" in index and up.url in index and commit[:12] in index
        status, _, body = hub.raw("GET", "/org/tiny")
        page = body.decode()
        assert status == 200 and commit in page and "torch-cpu" in page and "sha256 digest" in page
        assert up.logged(mark) == []  # the pages read what the hub holds: no upstream request
    finally:
        hub.stop()


@pytest.mark.parametrize("args, env, expected", [
    (["--upstream", "ftp://example.org"], {}, "--upstream: expected an http(s) URL of a hub such as "
                                              "https://huggingface.co, got 'ftp://example.org'"),
    ([], {"KBUILD_HUB_UPSTREAM": "example.org"}, "KBUILD_HUB_UPSTREAM: expected an http(s) URL"),
    (["--allow-shadowing"], {}, "--allow-shadowing: needs --upstream URL (or $KBUILD_HUB_UPSTREAM)"),
    (["--upstream", "http://127.0.0.1:9", "--upstream-timeout", "0", "5"], {},
     "--upstream-timeout: expected two positive numbers of seconds, got 0.0 5.0"),
    (["--upstream", "http://127.0.0.1:9", "--upstream-token-file", "{open_token}"], {},
     "--upstream-token-file: {open_token}: the token file is readable by others (mode 0644)"),
], ids=["scheme", "variable", "shadowing-without-upstream", "timeout", "token-mode"])
def test_a_bad_upstream_setting_is_one_line_and_exit_2(args, env, expected, tmp_path):
    """Refused before the hub listens (a served hub would outlive the timeout)."""
    token = tmp_path / "upstream.token"
    token.write_text("hf_secret\n")
    token.chmod(0o644)
    args = [a.replace("{open_token}", str(token)) for a in args]
    expected = expected.replace("{open_token}", str(token))
    environ = {k: v for k, v in os.environ.items() if k != "KBUILD_HUB_UPSTREAM"} | env
    done = subprocess.run([sys.executable, "-m", "builder.commands.main", "hub", "serve", "--root", str(tmp_path / "hub"),
                           "--port", "0", *args], capture_output=True, text=True, timeout=120, env=environ)
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert done.stderr.splitlines()[0].startswith(f"kbuild: error: {expected}"), done.stderr
    assert "Traceback" not in done.stderr and "hf_secret" not in done.stderr


def test_an_offline_hub_serves_its_cache_and_upstream_org_still_decides(upstream, tmp_path, runtime_env):  # noqa: F811
    """No upstream at all (an air-gapped site): the cache is served read-only, and a local repo in the
    same organisation keeps the org's other names from it unless --upstream-org names the org."""
    up, _ = upstream
    hub = front(tmp_path, up.url)
    try:
        commit = HfApi(endpoint=hub.url).kernel_info("org/tiny", revision="v1").sha
        assert get_kernel("org/tiny@v1", hub=hub.url, trust_remote_code=True).double(2) == 4
        HfApi(endpoint=hub.url, token=TOKEN).create_repo("org/own", repo_type="kernel")  # the upstream has no org/own
    finally:
        hub.stop()
    offline = ServerThread(tmp_path / "front")
    try:
        with pytest.raises(RepositoryNotFoundError, match="not looked up upstream"):
            HfApi(endpoint=offline.url).kernel_info("org/tiny", revision="v1")
    finally:
        offline.stop()
    shared = ServerThread(tmp_path / "front", policy=UpstreamPolicy(frozenset({"org"})))
    try:
        status, headers, _ = shared.raw("GET", "/api/kernels/org/tiny/revision/v1")
        assert status == 200 and "as last seen" in headers["x-kbuild-upstream-stale"]
        new_process()
        assert get_kernel(f"org/tiny@{commit}", hub=shared.url, trust_remote_code=True).double(3) == 6
    finally:
        shared.stop()
