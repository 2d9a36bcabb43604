"""`kbuild publish` into a real local git hub: slices, stale files, checks, dry runs, retries.

The kernel is Python-only (two noarch variants), so each build takes a fraction of a second;
the git hub and the CLI are the real ones.
"""

from __future__ import annotations

import json
import subprocess
import threading
from pathlib import Path

import pytest

from builder.commands.main import main
from tiny_kernel import INIT, bare, build, commit, git, hub, kernel, publish, tree, write_kernel  # noqa: F401 (fixtures)


def test_publish_puts_variants_on_the_version_branch_and_the_card_on_main(kernel, hub, capsys):
    build(kernel)
    code, output = publish(kernel, hub, capsys=capsys)
    assert code == 0, output
    sha = git(bare(hub), "rev-parse", "v1").strip()
    assert f"commit {sha}" in output and f"@{sha}" in output
    files = tree(hub, "v1")
    for variant in ("torch-cpu", "torch-cuda"):
        assert {f"build/{variant}/__init__.py", f"build/{variant}/_ops.py", f"build/{variant}/metadata.json"} <= set(files)
    assert "benchmarks/benchmark.py" in files
    card = git(bare(hub), "show", "main:README.md")
    assert card.startswith("---\nlibrary_name: kernels\nlicense: Apache-2.0")
    assert 'get_kernel("org/tiny", version=1)' in card and "`double`" in card and "`torch-cuda`" in card
    # One publish is one commit on the branch; `git clone` of the hub folder works.
    assert git(bare(hub), "rev-list", "--count", "main..v1").strip() == "1"
    clone = kernel.parent / "clone"
    git(kernel.parent, "clone", "-q", "-b", "v1", str(bare(hub)), str(clone))
    assert (clone / "build" / "torch-cpu" / "metadata.json").is_file()


def test_republishing_the_same_build_changes_nothing(kernel, hub, capsys):
    build(kernel)
    assert publish(kernel, hub)[0] == 0
    head = git(bare(hub), "rev-parse", "v1")
    code, output = publish(kernel, hub, capsys=capsys)
    assert code == 0 and "nothing to publish" in output
    assert git(bare(hub), "rev-parse", "v1") == head


def test_a_slice_replaces_only_its_variant_and_deletes_its_stale_files(kernel, hub):
    (kernel / "torch-ext" / "tiny" / "extra.py").write_text("X = 1\n")
    commit(kernel)
    build(kernel)
    assert publish(kernel, hub)[0] == 0
    cpu_before = git(bare(hub), "rev-parse", "v1:build/torch-cpu")
    (kernel / "torch-ext" / "tiny" / "extra.py").unlink()
    commit(kernel)
    build(kernel)
    assert publish(kernel, hub, "--variant", "torch-cuda")[0] == 0
    files = tree(hub, "v1")
    assert "build/torch-cuda/extra.py" not in files  # stale file of the published slice deleted
    assert "build/torch-cpu/extra.py" in files  # the other variant is untouched
    assert git(bare(hub), "rev-parse", "v1:build/torch-cpu") == cpu_before


def test_dirty_builds_are_refused_unless_allowed(kernel, hub, capsys):
    (kernel / "torch-ext" / "tiny" / "__init__.py").write_text(
        INIT.format(body="def double(x):\n    return x + x\n", names=["double"]))
    build(kernel)
    code, output = publish(kernel, hub, capsys=capsys)
    assert code != 0 and "uncommitted changes" in output and "--allow-dirty" in output
    assert not bare(hub).exists() or "v1" not in git(bare(hub), "branch")
    assert publish(kernel, hub, "--allow-dirty")[0] == 0


def test_removing_a_public_name_is_refused_unless_forced(kernel, hub, capsys):
    write_kernel(kernel, names=("double", "triple"))
    commit(kernel)
    build(kernel)
    assert publish(kernel, hub)[0] == 0
    write_kernel(kernel, names=("double",))
    commit(kernel)
    build(kernel)
    head = git(bare(hub), "rev-parse", "v1")
    code, output = publish(kernel, hub, capsys=capsys)
    assert code != 0 and "triple" in output and "new major" in output
    assert git(bare(hub), "rev-parse", "v1") == head
    assert publish(kernel, hub, "--force")[0] == 0


def test_branch_rules(kernel, hub, capsys):
    build(kernel)
    code, output = publish(kernel, hub, "--branch", "v2", capsys=capsys)
    assert code != 0 and "does not match [general] version = 1" in output
    write_kernel(kernel, hub='[general.hub]\nrepo-id = "org/tiny"\nbranch = "stable"\n')
    commit(kernel)
    build(kernel)
    code, output = publish(kernel, hub, capsys=capsys)
    assert code != 0 and "is not v<N>" in output and "build.toml:" in output
    assert publish(kernel, hub, "--branch", "stable")[0] == 0  # explicit: on purpose
    assert "build/torch-cpu/__init__.py" in tree(hub, "stable")


def test_mixed_versions_are_refused(kernel, hub, capsys):
    build(kernel)
    meta = kernel / "build" / "torch-cpu" / "metadata.json"
    data = json.loads(meta.read_text())
    data["version"] = 2
    meta.write_text(json.dumps(data))
    code, output = publish(kernel, hub, capsys=capsys)
    assert code != 0 and "mixed versions" in output and "torch-cpu: 2" in output


def test_variants_of_different_sources_are_refused(kernel, hub, capsys):
    build(kernel)
    meta = kernel / "build" / "torch-cpu" / "metadata.json"
    data = json.loads(meta.read_text())
    data["provenance"]["kernel"]["tree"] = "0" * 40  # as if left by a build of older sources
    meta.write_text(json.dumps(data))
    code, output = publish(kernel, hub, capsys=capsys)
    assert code != 0 and "built from different sources" in output and "torch-cpu: 0000000" in output
    assert publish(kernel, hub, "--variant", "torch-cuda")[0] == 0  # the slice of one source is fine


def test_dry_run_prints_the_plan_and_writes_nothing(kernel, hub, capsys):
    build(kernel)
    code, output = publish(kernel, hub, "--dry-run", capsys=capsys)
    assert code == 0
    assert "dry run: org/tiny@v1" in output and "add      build/torch-cpu/__init__.py" in output
    assert not bare(hub).exists()


def test_json_summary(kernel, hub, capsys):
    build(kernel)
    code, output = publish(kernel, hub, "--json", capsys=capsys)
    summary = json.loads(output[output.index("{"):])
    assert code == 0 and summary["branch"] == "v1" and summary["repo_id"] == "org/tiny"
    assert summary["commit"] == git(bare(hub), "rev-parse", "v1").strip()
    assert "build/torch-cuda/_ops.py" in summary["added"]


def test_concurrent_slices_both_land(kernel, hub):
    build(kernel)
    assert publish(kernel, hub, "--variant", "torch-cpu")[0] == 0  # the repo and branch exist
    (kernel / "torch-ext" / "tiny" / "more.py").write_text("Y = 2\n")
    commit(kernel)
    build(kernel)
    codes = []
    threads = [threading.Thread(target=lambda v=v: codes.append(publish(kernel, hub, "--variant", v)[0]))
               for v in ("torch-cpu", "torch-cuda")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert codes == [0, 0]
    files = tree(hub, "v1")
    assert "build/torch-cpu/more.py" in files and "build/torch-cuda/more.py" in files


# -- the same publish through `kbuild hub serve`, read back with huggingface_hub ------------------

@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from hubserver import ServerThread

    running = ServerThread(tmp_path_factory.mktemp("served"))
    yield running
    running.stop()


@pytest.fixture
def http_env(monkeypatch, tmp_path):
    from hubserver import TOKEN

    monkeypatch.setenv("HF_TOKEN", TOKEN)
    monkeypatch.setenv("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))


def download(server, rev: str, path: str, cache: Path) -> bytes:
    from huggingface_hub import hf_hub_download

    local = hf_hub_download("org/tiny", path, revision=rev, repo_type="kernel", endpoint=server.url,
                            cache_dir=cache)
    return Path(local).read_bytes()


def test_publish_over_http_then_download(kernel, server, http_env, tmp_path, capsys):
    from huggingface_hub import HfApi

    build(kernel)
    code, output = publish(kernel, server.url, "--repo-id", "org/tiny", capsys=capsys)
    assert code == 0, output
    api = HfApi(endpoint=server.url)
    refs = {b.name: b.target_commit for b in api.list_repo_refs("org/tiny", repo_type="kernel").branches}
    assert f"commit {refs['v1']}" in output
    # the printed link opens: kbuild's hub shows a kernel at /ORG/NAME (the Hugging Face Hub's
    # /kernels/ORG/NAME/tree/REV is a 404 here)
    import urllib.request

    (link,) = [line for line in output.splitlines() if line.startswith(server.url)]
    assert link == f"{server.url}/org/tiny", output
    with urllib.request.urlopen(link, timeout=30) as page:
        assert page.status == 200 and "org/tiny" in page.read().decode()
    assert download(server, "v1", "build/torch-cpu/__init__.py", tmp_path / "c1") == (
        kernel / "build" / "torch-cpu" / "__init__.py").read_bytes()
    card = download(server, "main", "README.md", tmp_path / "c1").decode()
    assert card.startswith("---\nlibrary_name: kernels")


def test_two_version_branches_and_a_sha_pin_after_the_branch_moved(kernel, server, http_env, tmp_path):
    build(kernel)
    assert publish(kernel, server.url, "--repo-id", "org/tiny")[0] == 0
    from huggingface_hub import HfApi

    api = HfApi(endpoint=server.url)
    first = {b.name: b.target_commit for b in api.list_repo_refs("org/tiny", repo_type="kernel").branches}["v1"]
    write_kernel(kernel, names=("double", "halve"), version=2)
    commit(kernel)
    build(kernel)
    assert publish(kernel, server.url, "--repo-id", "org/tiny")[0] == 0  # v2: a new major
    write_kernel(kernel, names=("double", "triple"), version=1)
    commit(kernel)
    build(kernel)
    assert publish(kernel, server.url, "--repo-id", "org/tiny")[0] == 0  # v1 moves on
    path = "build/torch-cpu/__init__.py"
    assert b"halve" in download(server, "v2", path, tmp_path / "c") and b"triple" not in download(
        server, "v2", path, tmp_path / "c")
    assert b"triple" in download(server, "v1", path, tmp_path / "c")
    old = download(server, first, path, tmp_path / "c")  # pinned: the old bytes, branch moved or not
    assert b"def double" in old and b"triple" not in old


@pytest.mark.parametrize("token", [None, "kb_wrong_token"], ids=["no-token", "wrong-token"])
def test_publishing_over_http_without_a_valid_token_is_one_line(kernel, server, tmp_path, token):
    """Issue 10, finding 10: a missing or wrong token could end in a traceback."""
    import os
    import sys

    from huggingface_hub import HfApi

    from hubserver import TOKEN

    build(kernel)
    name = f"org/tiny-{os.urandom(3).hex()}"
    # The repo exists: create_repo(exist_ok=True) then built a RepoUrl for a non-Hub host (HfUriError)
    HfApi(endpoint=server.url, token=TOKEN).create_repo(name, repo_type="kernel")
    env = {k: v for k, v in os.environ.items() if k not in ("HF_TOKEN", "HF_ENDPOINT", "KBUILD_HUB")}
    env["HF_HOME"] = str(tmp_path / "hf-home")  # no stored `hf auth login` token either
    if token:
        env["HF_TOKEN"] = token
    done = subprocess.run([sys.executable, "-m", "builder.commands.main", "publish", str(kernel), "--hub", server.url,
                           "--repo-id", name],
                          capture_output=True, text=True, env=env)
    output = done.stdout + done.stderr
    assert done.returncode != 0 and "Traceback" not in output, output
    errors = [line for line in output.splitlines() if line.startswith("kbuild: error:")]
    # kbuild's own hub says it is one (X-Kbuild-Hub), so the error names its token file, not a Hugging Face login
    sent = "no token was sent" if token is None else "the token sent (HF_TOKEN or huggingface_hub's login) is not one of them"
    assert len(errors) == 1 and errors[0].endswith(
        f"{server.url} (kbuild hub serve) takes writes only with one of its tokens, and {sent}"), output
    assert "Client error" not in output and "hf auth login" not in output, output
    hints = [line.strip() for line in output.splitlines() if line.strip().startswith("hint:")]
    assert hints == ["hint: this hub (kbuild hub serve) takes its tokens from its token file, not from a Hugging Face "
                     "login: HF_TOKEN=$(cat ROOT/.token), ROOT being the folder it serves (~/.cache/kbuild/hub by "
                     "default), or HF_TOKEN=$(cat FILE) for the file given to its --token-file"], output


def test_publishing_to_a_hub_that_is_not_running_names_it_and_says_what_to_do(kernel, http_env, capsys):
    import socket

    build(kernel)
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    code, output = publish(kernel, url, "--repo-id", "org/tiny", capsys=capsys)
    assert code != 0 and "Traceback" not in output, output
    errors = [line for line in output.splitlines() if line.startswith("kbuild: error:")]
    assert len(errors) == 1 and errors[0].startswith(
        f"kbuild: error: cannot look up org/tiny: no answer from the hub at {url} ("), output
    assert "hint: is the hub running? Start one with `kbuild hub serve`, or check its address: --hub, else KBUILD_HUB, " \
           "else HF_ENDPOINT" in output, output


def test_publish_follows_the_same_hub_rule_as_get_kernel(kernel, server, http_env, tmp_path, monkeypatch, capsys):
    """No --hub: $KBUILD_HUB, else $HF_ENDPOINT (what get_kernel and kbuild lock read), else the
    local hub. With only HF_ENDPOINT set, the publish lands on that HTTP hub."""
    from huggingface_hub import HfApi

    build(kernel)
    monkeypatch.delenv("KBUILD_HUB", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", server.url)
    capsys.readouterr()
    assert main(["publish", str(kernel), "--repo-id", "org/endpoint"]) == 0, capsys.readouterr()
    refs = HfApi(endpoint=server.url).list_repo_refs("org/endpoint", repo_type="kernel")
    assert "v1" in {b.name for b in refs.branches}
