"""`kbuild hub mirror`: the real CLI copies repos from a real upstream hub (the real app on
127.0.0.1) into a fresh hub folder; that folder served by a real `kbuild hub serve` app with no
upstream answers what the upstream answered, commit ids included, to kbuild's loader and to
huggingface_hub, without a request reaching the upstream."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest
from huggingface_hub import HfApi, snapshot_download

from builder.commands.main import main
from hf_envs import ensure
from hubserver import TOKEN, ServerThread
from kbuild import get_kernel
from runtime_hubs import Kernel, new_process, runtime_env, torch_probes  # noqa: F401 (fixtures)
from ssh_signers import allowed_signers, keygen

WEIGHTS = os.urandom(1 << 20)


@pytest.fixture(scope="module")
def signers(tmp_path_factory) -> Path:
    """The allowed_signers file that trusts the key org/tiny v1 is signed with."""
    folder = tmp_path_factory.mktemp("signers")
    return allowed_signers(folder / "org.allowed_signers", **{"alice@example.com": keygen(folder, "alice")})


@pytest.fixture(scope="module")
def upstream(tmp_path_factory, signers):
    """org/tiny v1 (signed: kbuild publish --sign) and v2 (torch-cpu and torch-cuda, kbuild publish),
    org/tampered v1 (a variant changed after it was digested), models/org/small-model."""
    root = tmp_path_factory.mktemp("upstream")
    kernel = Kernel(tmp_path_factory.mktemp("tiny")).write(backends=("cpu", "cuda")).build()
    kernel.publish(root, "--sign", "--sign-key", str(signers.parent / "alice"))
    v1 = {name: (kernel.variant(name) / "metadata.json").read_bytes() for name in ("torch-cpu", "torch-cuda")}
    kernel.write(version=2, backends=("cpu", "cuda")).build()
    kernel.publish(root)
    server = ServerThread(root, trusted=("org",))
    api = HfApi(endpoint=server.url, token=TOKEN)
    bad = tmp_path_factory.mktemp("bad") / "torch-cpu"
    shutil.copytree(kernel.variant("torch-cpu"), bad)
    (bad / "__init__.py").write_text((bad / "__init__.py").read_text() + "\nimport os  # changed\n")
    api.create_repo("org/tampered", repo_type="kernel")
    api.create_branch("org/tampered", repo_type="kernel", branch="v1")
    api.upload_folder(repo_id="org/tampered", repo_type="kernel", folder_path=bad, path_in_repo="build/torch-cpu",
                      revision="v1")
    api.create_repo("org/small-model")
    folder = tmp_path_factory.mktemp("model")
    (folder / "config.json").write_text(json.dumps({"model_type": "tiny", "hidden_size": 8}))
    (folder / "weights.bin").write_bytes(WEIGHTS)
    api.upload_folder(repo_id="org/small-model", folder_path=folder)
    yield server, v1, root
    server.stop()


def heads(server: ServerThread, repo_id: str = "org/tiny") -> dict[str, str]:
    refs = HfApi(endpoint=server.url).list_repo_refs(repo_id, repo_type="kernel")
    return {b.name: b.target_commit for b in refs.branches}


def mirror(capsys, *args) -> tuple[int, str, str]:
    code = main(["hub", "mirror", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


def upstream_requests(server: ServerThread, since: int, what: str = "") -> list[str]:
    return [line for line in server.logged(since) if what in line]


def test_mirror_at_a_sha_and_at_v1_then_serve_offline(upstream, signers, tmp_path, capsys, runtime_env,  # noqa: F811
                                                      monkeypatch):
    up, v1_metadata, _ = upstream
    root, sha = tmp_path / "site", heads(up)["v1"]
    # org's rule: the mirror checks each variant's signature (signatures/<variant>/) as the front does
    monkeypatch.setenv("KBUILD_REQUIRE_SIGNATURE", "org")
    monkeypatch.setenv("KBUILD_ALLOWED_SIGNERS", f"org={signers}")
    code, out, err = mirror(capsys, f"org/tiny@{sha}", "org/tiny@v1", "--from", up.url, "--root", root)
    assert code == 0, err
    # @v1 is that sha: one commit, mirrored once
    assert "mirrored 1 repo(s) at 1 commit(s)" in out and out.rstrip().endswith("; 2 variant(s) verified")
    assert "build/torch-cpu: verified, sha256 digest of" in err and "signed by alice@example.com" in err
    code, out, err = mirror(capsys, "org/small-model", "--repo-type", "model", "--from", up.url, "--root", root)
    assert code == 0, err

    model_sha, v2 = HfApi(endpoint=up.url).model_info("org/small-model").sha, heads(up)["v2"]
    mark = len(up.logged())
    offline = ServerThread(root)  # no upstream: what the folder holds, read-only
    try:
        # the signatures were mirrored with their variants: the loader's rule finds them offline
        assert get_kernel(f"org/tiny@{sha}", hub=offline.url, trust_remote_code=True).double(3) == 6
        new_process()
        assert get_kernel("org/tiny@v1", hub=offline.url, trust_remote_code=True).double(2) == 4
        api = HfApi(endpoint=offline.url)
        assert api.kernel_info("org/tiny", revision="v1").sha == sha  # the upstream's commit id
        assert {b.name for b in api.list_repo_refs("org/tiny", repo_type="kernel").branches} >= {"v1", "v2"}
        got = Path(snapshot_download("org/tiny", repo_type="kernel", revision=sha, endpoint=offline.url,
                                     cache_dir=tmp_path / "hf", token=False))
        for name in ("torch-cpu", "torch-cuda"):
            assert (got / "build" / name / "metadata.json").read_bytes() == v1_metadata[name]
        model = Path(snapshot_download("org/small-model", endpoint=offline.url, cache_dir=tmp_path / "hf2", token=False))
        assert (model / "weights.bin").read_bytes() == WEIGHTS
        assert api.model_info("org/small-model").sha == model_sha
        # v2 was never mirrored: one clear error, not the upstream's
        status, _, body = offline.raw("GET", f"/api/kernels/org/tiny/revision/{v2}")
        assert status == 504 and b"never fetched" in body
    finally:
        offline.stop()
    assert upstream_requests(up, mark) == []


def test_a_rerun_fetches_nothing_and_the_newest_version_is_the_default(upstream, tmp_path, capsys):
    up, _, _ = upstream
    root = tmp_path / "site"
    code, out, err = mirror(capsys, "org/tiny", "--from", up.url, "--root", root)
    assert code == 0, err
    assert f"org/tiny@v2 ({heads(up)['v2'][:12]})" in err  # no @: the newest vN branch
    mark = len(up.logged())
    code, out, err = mirror(capsys, "org/tiny", "--from", up.url, "--root", root)
    assert code == 0, err
    assert "already mirrored" in err and "nothing to fetch" in err
    assert "0 file(s) fetched (0 B)" in out and "2 variant(s) verified (0 this run)" in out
    asked = upstream_requests(up, mark)
    # only the refs are asked again (a branch may have moved); no tree, no file
    assert asked and all("/refs" in line or "/revision/" in line or "/overview" in line for line in asked), asked
    assert upstream_requests(up, mark, "/resolve/") == [] and upstream_requests(up, mark, "/tree/") == []


def test_a_mirrored_repo_the_hub_folder_would_not_serve_is_warned_of(upstream, tmp_path, capsys):
    from kbuild_hub.gitstore import GitStore

    up, _, _ = upstream
    root = tmp_path / "site"
    GitStore(root).create_repo("kernel", "org/own")  # org is this hub's: its other names are not looked up
    GitStore(root).create_repo("model", "org/small-model")  # a local repo of the same name wins
    code, out, err = mirror(capsys, "org/tiny@v1", "--from", up.url, "--root", root)
    assert code == 0, err
    assert "kbuild: warning: org/tiny: organisation org has repos in" in err and "--upstream-org org" in err
    code, out, err = mirror(capsys, "org/small-model", "--repo-type", "model", "--from", up.url, "--root", root)
    assert code == 0, err
    assert "kbuild: warning: org/small-model: " in err and "serves instead of the mirrored one" in err


def test_variant_filter_and_unknown_variant(upstream, tmp_path, capsys):
    up, _, _ = upstream
    root = tmp_path / "site"
    code, out, err = mirror(capsys, "org/tiny@v1", "--variant", "torch-cpu", "--from", up.url, "--root", root)
    assert code == 0, err
    assert "1 variant(s) verified" in out
    offline = ServerThread(root)
    try:
        sha = heads(up)["v1"]
        status, _, _ = offline.raw("GET", f"/kernels/org/tiny/resolve/{sha}/build/torch-cpu/metadata.json")
        assert status == 200
        status, _, _ = offline.raw("GET", f"/kernels/org/tiny/resolve/{sha}/signatures/torch-cpu/metadata.json.sig")
        assert status == 200  # a variant's signature comes with it, and only its own
        for path in ("build/torch-cuda/metadata.json", "signatures/torch-cuda/metadata.json.sig"):
            status, _, body = offline.raw("GET", f"/kernels/org/tiny/resolve/{sha}/{path}")
            assert status == 504 and b"never fetched" in body
    finally:
        offline.stop()

    code, out, err = mirror(capsys, "org/tiny@v1", "--variant", "torch-nope", "--from", up.url, "--root", tmp_path / "x")
    assert code == 2
    assert err.strip().splitlines() == [
        "kbuild: error: --variant: torch-nope is in none of the kernel repos mirrored (org/tiny@v1); "
        "they have: torch-cpu, torch-cuda"]


@pytest.mark.parametrize("args, expected", [
    (["org/tiny"], "--from: expected the URL of the hub to mirror from"),
    (["org/tiny", "--from", "ftp://example.org"], "--from: expected an http(s) URL"),
    (["org/tiny", "--from", "huggingface.co"], "--from: expected an http(s) URL"),
    (["not-a-repo", "--from", "http://127.0.0.1:9"], "REPO 'not-a-repo': expected ORG/NAME"),
    (["org/tiny@", "--from", "http://127.0.0.1:9"], "REPO 'org/tiny@': nothing after @"),
    (["--from", "http://127.0.0.1:9"], "nothing to mirror"),
])
def test_bad_arguments_are_one_line_errors(args, expected, tmp_path, capsys):
    code, out, err = mirror(capsys, *args, "--root", tmp_path / "site")
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kbuild: error: ") and expected in lines[0], err
    assert not (tmp_path / "site").exists()


def test_failures_are_one_line_each_and_fail_the_run(upstream, tmp_path, capsys):
    up, _, _ = upstream
    root = tmp_path / "site"
    code, out, err = mirror(capsys, "org/tampered@v1", "org/tiny@v9", "org/tiny@v1", "--from", up.url, "--root", root)
    assert code == 1
    errors = [line for line in err.splitlines() if line.startswith("kbuild: error: ")]
    assert len(errors) == 2, err
    assert errors[0].startswith("kbuild: error: org/tiny@v9: ") and "has no" in errors[0]
    assert errors[1].startswith("kbuild: error: org/tampered@v1: ") and "__init__.py does not match" in errors[1]
    assert "2 failure(s)" in out and "2 variant(s) verified" in out  # org/tiny@v1 was still mirrored
    blobs = {p.name for p in (root / ".upstream" / "blobs").rglob("*") if p.is_file()}
    # nothing of the refused variant was kept
    tampered = heads(up, "org/tampered")["v1"]
    assert _blob_of(up, "org/tampered", tampered, "build/torch-cpu/__init__.py") not in blobs
    assert _blob_of(up, "org/tampered", tampered, "build/torch-cpu/metadata.json") not in blobs
    # an upstream that is not there: each repo one line, the run fails
    code, out, err = mirror(capsys, "org/tiny@v1", "--from", "http://127.0.0.1:9", "--root", tmp_path / "other")
    errors = [line for line in err.splitlines() if line.startswith("kbuild: error: ")]
    assert code == 1 and len(errors) == 1 and errors[0].startswith("kbuild: error: org/tiny@v1: ")
    assert "127.0.0.1:9" in errors[0]


def _blob_of(server: ServerThread, repo_id: str, commit: str, path: str) -> str:
    [info] = HfApi(endpoint=server.url).get_paths_info(repo_id, [path], repo_type="kernel", revision=commit)
    return info.blob_id


def test_lock_files_kbuild_and_hugging_face(upstream, tmp_path, capsys, runtime_env):  # noqa: F811
    up, v1_metadata, _ = upstream
    sha = heads(up)["v1"]
    project = tmp_path / "app"
    project.mkdir()
    (project / "pyproject.toml").write_text('[project]\nname = "app"\n\n[tool.kbuild.kernels]\n"org/tiny" = 1\n')
    assert main(["lock", str(project), "--hub", up.url]) == 0
    capsys.readouterr()
    code, out, err = mirror(capsys, "--lock", project / "kernels.lock", "--from", up.url, "--root", tmp_path / "a")
    assert code == 0, err
    assert f"org/tiny@{sha} ({sha[:12]})" in err and "2 variant(s) verified" in out

    # a kbuild lock pins content too: a metadata.json other than the locked one, or a locked variant
    # the commit lacks, is a failure naming it
    data = json.loads((project / "kernels.lock").read_text())
    data["kernels"]["org/tiny"]["variants"]["torch-cpu"] = "0" * 64
    data["kernels"]["org/tiny"]["variants"]["torch-gone"] = "1" * 64
    (project / "kernels.lock").write_text(json.dumps(data))
    code, out, err = mirror(capsys, "--lock", project / "kernels.lock", "--from", up.url, "--root", tmp_path / "a")
    errors = [line for line in err.splitlines() if line.startswith("kbuild: error: ")]
    assert code == 1 and errors == [
        f"kbuild: error: org/tiny@{sha} (kernels.lock): build/torch-cpu: metadata.json does not match the lock file "
        f"(locked 000000000000, the upstream's {hashlib.sha256(v1_metadata['torch-cpu']).hexdigest()[:12]})",
        f"kbuild: error: org/tiny@{sha} (kernels.lock): build/torch-gone: locked, but not at commit {sha[:12]}"], err

    # Hugging Face kernels' format, written by kernels 0.17's own lock writer, and the <= 0.16 one by hand
    from kernels._rust import KernelDependency, KernelLock, KernelLocks, KernelVersion

    hf = tmp_path / "hf.lock"
    hf.write_text(KernelLocks({KernelDependency("org/tiny", KernelVersion.Version(1)): KernelLock(sha)}).to_json())
    old = tmp_path / "old.lock"
    old.write_text(json.dumps([{"repo_id": "org/tiny", "sha": sha, "variants": {
        "torch-cpu": {"hash": "sha256-x", "hash_type": "git_lfs_concat"}}}]))
    root = tmp_path / "b"
    code, out, err = mirror(capsys, "--lock", hf, "--lock", old, "--from", up.url, "--root", root)
    assert code == 0, err
    assert "mirrored 1 repo(s) at 1 commit(s)" in out
    offline = ServerThread(root)
    try:
        assert get_kernel(f"org/tiny@{sha}", hub=offline.url, trust_remote_code=True).double(5) == 10
    finally:
        offline.stop()

    bad = tmp_path / "bad.lock"
    bad.write_text(json.dumps([{"repo_id": "org/tiny", "sha": "v1"}]))
    code, out, err = mirror(capsys, "--lock", bad, "--from", up.url, "--root", tmp_path / "c")
    assert code == 2 and err.strip().splitlines() == [
        f"kbuild: error: --lock: {bad}: entry 1: org/tiny's commit 'v1' is not a full 40-hex commit id"]


def test_transformers_mapping_is_read_from_the_installed_transformers(upstream, tmp_path, capsys, runtime_env):  # noqa: F811
    """transformers 5.25 (the kernels-0.19 environment) read by its own Python: its default layer
    mapping and hub functions; then a mirror of them from an upstream that has one of them."""
    from builder.hub.transformers_kernels import read

    python = str(ensure("kernels-0.19"))
    mapping = read(python)
    assert mapping["transformers"] == "5.25.0"
    found = {(k["repo_id"], k["revision"]): k["uses"] for k in mapping["kernels"]}
    assert found[("kernels-community/liger-kernels", "v4")] == ["layer RMSNorm"]
    assert "layer rotary_pos_emb" in found[("kernels-community/rotary", "v2")]
    assert "layer SiLU" in found[("kernels-community/activation", "v1")]
    assert ("biohub/esmfold2-trimul", "ab10a577bf38f385871eb9fc7c916ceadf3089a5") in found
    assert found[("kernels-community/sonic-moe", "ep-support")] == ["function sonic-moe"]
    assert ("kernels-community/finegrained-fp8", "v4") in found

    # the upstream has kernels-community/rotary v2 (the tiny kernel under that name); the rest are missing
    up, _, up_root = upstream
    rotary = Kernel(tmp_path / "rotary", repo_id="kernels-community/rotary")
    rotary.root.mkdir()
    rotary.write(version=2, backends=("cpu",)).build().publish(up_root, "--branch", "v2")
    root = tmp_path / "site"
    code, out, err = mirror(capsys, "--transformers", "--python", python, "--from", up.url, "--root", root)
    assert code == 1
    errors = [line for line in err.splitlines() if line.startswith("kbuild: error: ")]
    assert len(errors) == len(found) - 1, err
    assert "kbuild: error: kernels-community/liger-kernels@v4 (transformers: layer RMSNorm): upstream " in err
    assert "mirrored 1 repo(s)" in out and "1 variant(s) verified" in out
    offline = ServerThread(root)
    try:
        assert HfApi(endpoint=offline.url).kernel_info("kernels-community/rotary", revision="v2").sha == \
            heads(up, "kernels-community/rotary")["v2"]
    finally:
        offline.stop()

    # kbuild's own Python has no transformers: say which Python to use
    code, out, err = mirror(capsys, "--transformers", "--from", up.url, "--root", root)
    assert code == 2 and "cannot import transformers" in err and "--python" in err


def test_a_private_upstream_gets_the_token_file_and_only_it(upstream, tmp_path, capsys, monkeypatch):
    up, _, up_root = upstream
    private = ServerThread(up_root, public_read=False)  # the same repos, reads need a token
    monkeypatch.setenv("HF_TOKEN", TOKEN)  # the caller's own token is never sent upstream
    try:
        code, out, err = mirror(capsys, "org/tiny@v1", "--from", private.url, "--root", tmp_path / "a")
        errors = [line for line in err.splitlines() if line.startswith("kbuild: error: ")]
        assert code == 1 and len(errors) == 1 and errors[0].startswith("kbuild: error: org/tiny@v1: ")
        assert "refused" in errors[0]
        token = tmp_path / "token"
        token.write_text(TOKEN + "\n")
        token.chmod(0o644)
        code, out, err = mirror(capsys, "org/tiny@v1", "--from", private.url, "--root", tmp_path / "a",
                                "--upstream-token-file", token)
        assert code == 2 and err.startswith("kbuild: error: --upstream-token-file: ")
        token.chmod(0o600)
        code, out, err = mirror(capsys, "org/tiny@v1", "--from", private.url, "--root", tmp_path / "a",
                                "--upstream-token-file", token)
        assert code == 0, err
        assert "2 variant(s) verified" in out
    finally:
        private.stop()


def test_an_upstream_that_is_down_changes_nothing_offline(upstream, tmp_path, capsys, runtime_env):  # noqa: F811
    """The mirrored folder served with --upstream at a dead port: the same answers, commit ids included."""
    from kbuild_hub.server import Upstream

    up, _, _ = upstream
    root, sha = tmp_path / "site", heads(up)["v1"]
    assert mirror(capsys, "org/tiny@v1", "--from", up.url, "--root", root)[0] == 0
    dead = ServerThread(root, upstream=Upstream("http://127.0.0.1:9", connect_timeout=1, read_timeout=1))
    try:
        assert get_kernel(f"org/tiny@{sha}", hub=dead.url, trust_remote_code=True).double(4) == 8
        status, headers, body = dead.raw("GET", "/api/kernels/org/tiny/revision/v1")
        assert status == 200 and json.loads(body)["sha"] == sha
        assert "last seen" in headers["x-kbuild-upstream-stale"]
    finally:
        dead.stop()


def test_the_live_view_on_a_terminal(upstream, tmp_path):
    """What a terminal shows (rich progress rows, not plain lines), rendered into a string."""
    import io

    from builder.hub.mirror import mirror as run_mirror
    from builder.hub.mirror_requests import parse_repo
    from builder.report import Reporter

    up, _, _ = upstream
    screen = io.StringIO()
    reporter = Reporter(plain=False, stream=screen)
    code = run_mirror(up.url, None, tmp_path / "site", [parse_repo("org/tiny@v1", "kernel")], None, reporter)
    assert code == 0
    shown = screen.getvalue()
    assert f"org/tiny@v1 ({heads(up)['v1'][:12]})" in shown and "8/8 files" in shown  # 3 and a signature each
    assert "build/torch-cuda: verified, sha256 digest of" in shown
    assert "mirrored 1 repo(s) at 1 commit(s)" in shown


HF_LOAD = """
import json, kernels
by_version = kernels.get_kernel("org/tiny", version=1)   # no trust_remote_code: the org card says trusted
by_sha = kernels.get_kernel("org/tiny", revision={sha!r})
print("PROBE " + json.dumps([kernels.__version__, by_version.double(3), by_sha.double(4)]))
"""


def test_hugging_face_kernels_loads_from_the_offline_mirror(upstream, tmp_path, capsys):
    """kernels 0.19.1 in its own environment, HF_ENDPOINT at the mirrored folder served offline: by
    version and by the upstream's sha, trusted through the organisation card the mirror kept."""
    import subprocess

    up, _, _ = upstream
    python = ensure("kernels-0.19")
    root, sha = tmp_path / "site", heads(up)["v1"]
    assert mirror(capsys, "org/tiny@v1", "--from", up.url, "--root", root)[0] == 0
    mark = len(up.logged())
    offline = ServerThread(root)
    try:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("HF_", "HUGGING", "KERNELS_", "TRANSFORMERS_", "KBUILD_"))}
        env.update(HF_ENDPOINT=offline.url, HF_HOME=str(tmp_path / "home"), HF_HUB_DISABLE_PROGRESS_BARS="1")
        done = subprocess.run([str(python), "-c", HF_LOAD.format(sha=sha)], env=env, capture_output=True, text=True,
                              timeout=300)
    finally:
        offline.stop()
    assert done.returncode == 0, done.stderr[-3000:]
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("PROBE ")]
    assert json.loads(line.removeprefix("PROBE ")) == ["0.19.1", 6, 8]
    assert upstream_requests(up, mark) == []
