"""get_kernel against a real local git hub and a real `kbuild hub serve`, with kernels published
by the real `kbuild publish`: refs, choice, fetching only one variant, digests, the cache, the
warm path, offline use, trust and the error messages.

The kernel is Python-only, so building and publishing it takes a fraction of a second.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import kbuild
from kbuild import IntegrityError, digest_tree, get_kernel, get_kernel_variants, has_kernel, install_kernel
from kbuild.errors import OfflineMiss, RevisionNotFound
from runtime_hubs import (
    CPU,
    CUDA130,
    ROCM,
    Kernel,
    bare,
    branch_head,
    git,
    new_process,
    runtime_env,
    start_server,
    torch_probes,
    upload_as_another_builder,
)

# The variant a plain get_kernel picks on this machine: a CUDA torch that sees no GPU takes CPU
# variants first (kbuild.variants.SystemInfo.device_visible); with a GPU, the CUDA one.
CHOSEN, OTHER = ("torch-cuda", "torch-cpu") if torch.cuda.is_available() else ("torch-cpu", "torch-cuda")

__all__ = ["runtime_env", "torch_probes"]  # fixtures, used by name

pytestmark = pytest.mark.usefixtures("runtime_env")


@pytest.fixture
def kernel(tmp_path) -> Kernel:
    return Kernel(tmp_path / "tiny").write().build()


@pytest.fixture
def hub(tmp_path, kernel) -> Path:
    """A local hub with org/tiny v1 = torch-cpu, torch-cuda."""
    hub = tmp_path / "hub"
    kernel.publish(hub)
    return hub


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    served, stop = start_server(tmp_path_factory.mktemp("served"))
    yield served
    stop()


@pytest.fixture
def http_hub(server, kernel, monkeypatch) -> str:
    """org/tiny v1 published over HTTP to `kbuild hub serve` (a fresh repo name per test)."""
    name = f"org/tiny-{os.urandom(3).hex()}"
    kernel.repo_id = name
    monkeypatch.setenv("HF_TOKEN", server.token)
    kernel.write().build().publish(server.url, "--repo-id", name)
    monkeypatch.delenv("HF_TOKEN")
    return name


def cached_variants(cache: Path) -> list[str]:
    return sorted(p.name for p in cache.glob("*/*/*/*/*") if p.is_dir())


# -- loading from a local hub ----------------------------------------------------------------------


def test_get_kernel_from_the_local_hub(hub, runtime_env):
    module = get_kernel("org/tiny@v1", hub=str(hub))
    assert module.double(21) == 42
    assert module.__name__ == json.loads((Path(module.__file__).parent / "metadata.json").read_text())["id"]
    assert sys.modules[module.__name__] is module
    assert module.VARIANT == "?" and Path(module.__file__).parent.name == CHOSEN
    # Only the chosen variant was fetched.
    assert cached_variants(runtime_env) == [CHOSEN]


def test_every_way_of_pinning_gives_the_same_module(hub):
    sha = branch_head(hub, "org/tiny", "v1")
    first = get_kernel("org/tiny@v1", hub=str(hub))
    assert get_kernel("org/tiny", version=1, hub=str(hub)) is first
    assert get_kernel("org/tiny", revision="v1", hub=str(hub)) is first
    assert get_kernel(f"org/tiny@{sha}", hub=str(hub)) is first
    assert get_kernel("org/tiny", revision=sha.upper(), hub=hub.as_uri()) is first
    git(bare(hub), "tag", "release-1", "v1")
    assert get_kernel("org/tiny@release-1", hub=str(hub)) is first


def test_one_build_on_two_branches_is_one_module(kernel, hub):
    kernel.publish(hub, "--branch", "v2", "--force")
    assert branch_head(hub, "org/tiny", "v1") != branch_head(hub, "org/tiny", "v2")
    assert get_kernel("org/tiny@v2", hub=str(hub)) is get_kernel("org/tiny@v1", hub=str(hub))


def test_the_hub_comes_from_kbuild_hub(hub, monkeypatch):
    monkeypatch.setenv("KBUILD_HUB", str(hub))
    assert get_kernel("org/tiny@v1").double(1) == 2


def test_backend_cpu_picks_the_cpu_build(hub, runtime_env):
    module = get_kernel("org/tiny@v1", hub=str(hub), backend="cpu")
    assert Path(module.__file__).parent.name == "torch-cpu"
    assert cached_variants(runtime_env) == ["torch-cpu"]


def test_the_preference_order_of_design_4(kernel, tmp_path):
    for name in ("torch214-cxx11-cu130-x86_64-linux", "torch-stable-abi210-cu130-x86_64-linux",
                 "torch214-cxx11-cu126-x86_64-linux", "torch-universal"):
        kernel.fake(name)
    hub = tmp_path / "hub"
    kernel.publish(hub)
    assert get_kernel("org/tiny@v1", hub=str(hub), system=CUDA130).VARIANT == "torch-stable-abi210-cu130-x86_64-linux"
    trace = get_kernel_variants("org/tiny@v1", hub=str(hub), system=CUDA130)
    assert [c.name for c in trace if c.accepted] == [
        "torch-stable-abi210-cu130-x86_64-linux", "torch214-cxx11-cu130-x86_64-linux", "torch-cuda",
        "torch-universal"]
    assert trace[-1].reason == "built for CUDA 12.6, this torch uses CUDA 13.0"
    assert get_kernel("org/tiny@v1", hub=str(hub), system=ROCM).VARIANT == "torch-universal"


def test_kernel_builder_builds_load_too(kernel, tmp_path):
    """Hugging Face's kernel-builder: compat layout `<name>/__init__.py`, no id, no digest."""
    variant = kernel.variant("torch-universal")
    (variant / "tiny").mkdir(parents=True)
    (variant / "tiny" / "__init__.py").write_text("from ._ops import ops\nVARIANT = 'kb'\ndef double(x):\n    return 2 * x\n")
    (variant / "tiny" / "_ops.py").write_text("ops = None\n")
    (variant / "metadata.json").write_text(json.dumps({
        "version": 1, "license": "Apache-2.0", "python-depends": [],
        "provenance": {"kernel-builder": {"version": "0.9"}, "kernel": {"commit": "1" * 40, "dirty": False}}}))
    hub = tmp_path / "hub"
    kernel.publish(hub, "--variant", "torch-cpu")
    upload_as_another_builder(hub, "org/tiny", "v1", variant)
    with pytest.raises(IntegrityError, match="records no digest.*pass allow_no_digest=True"):
        get_kernel("org/tiny@v1", hub=str(hub), system=ROCM)
    module = get_kernel("org/tiny@v1", hub=str(hub), system=ROCM, allow_no_digest=True)
    assert module.VARIANT == "kb" and module.double(2) == 4
    new_process()  # cached now: the cached copy is refused the same way without the opt-in
    with pytest.raises(IntegrityError, match="records no digest"):
        get_kernel("org/tiny@v1", hub=str(hub), system=ROCM)


def test_a_variant_without_metadata_is_refused_even_when_its_files_match_the_hub(kernel, tmp_path):
    """Finding 4: no metadata.json at all (so no digest, no provenance), and a file changed before
    upload: the hub's blob ids match what was uploaded, so only the digest rule stops it."""
    variant = kernel.variant("torch-universal")
    shutil.copytree(kernel.variant("torch-cpu"), variant)
    (variant / "metadata.json").unlink()
    (variant / "_ops.py").write_text("import os  # changed, and nothing records what was built\n")
    hub = tmp_path / "hub"
    kernel.publish(hub, "--variant", "torch-cpu")
    upload_as_another_builder(hub, "org/tiny", "v1", variant)
    with pytest.raises(IntegrityError, match="allow_no_digest=True"):
        install_kernel("org/tiny@v1", hub=str(hub), variant="torch-universal")


def test_a_new_commit_on_the_branch_is_seen_by_a_new_process(kernel, hub):
    assert get_kernel("org/tiny@v1", hub=str(hub)).VARIANT == "?"
    kernel.write(variant="second").build().publish(hub)
    new_process()
    assert get_kernel("org/tiny@v1", hub=str(hub)).VARIANT == "second"


def test_has_install_and_variants(hub, runtime_env):
    assert has_kernel("org/tiny@v1", hub=str(hub))
    assert not has_kernel("org/tiny@v1", hub=str(hub), system=ROCM)
    assert not has_kernel("org/tiny@v9", hub=str(hub))
    assert not has_kernel("org/missing@v1", hub=str(hub))
    assert cached_variants(runtime_env) == []  # nothing downloaded to answer
    path = install_kernel("org/tiny@v1", hub=str(hub), backend="cpu")
    assert path.name == "torch-cpu" and (path / "metadata.json").is_file()
    assert "_tiny_cpu" not in " ".join(sys.modules)  # installed, not imported
    assert install_kernel("org/tiny@v1", hub=str(hub), variant="torch-cuda").name == "torch-cuda"
    with pytest.raises(FileNotFoundError, match=f"has no variant 'torch-rocm'; it has: {CHOSEN}, {OTHER}"):
        install_kernel("org/tiny@v1", hub=str(hub), variant="torch-rocm")
    trace = get_kernel_variants("org/tiny@v1", hub=str(hub), system=CPU)
    assert [(c.name, c.reason) for c in trace] == [("torch-cpu", None),
                                                   ("torch-cuda", "built for cuda, this system uses cpu")]


def test_local_kernels_override(hub, kernel, monkeypatch):
    monkeypatch.setenv("LOCAL_KERNELS", f"org/other=/nowhere:org/tiny={kernel.root}")
    module = get_kernel("org/tiny@v1", hub=str(hub / "nothing-here"))
    assert Path(module.__file__).is_relative_to(kernel.root / "build")
    assert has_kernel("org/tiny@v1")
    monkeypatch.setenv("LOCAL_KERNELS", "org/tiny")
    with pytest.raises(ValueError, match="LOCAL_KERNELS: bad entry 'org/tiny'"):
        get_kernel("org/tiny@v1", hub=str(hub))


def test_no_version_given_lists_the_versions_or_says_there_is_no_such_repo(kernel, hub):
    kernel.publish(hub, "--branch", "v3", "--force")
    with pytest.raises(ValueError, match=r'no version given.*"org/tiny@v1".*version=1.*revision=.*sha>"\)\. '
                                         r'Versions there: v1, v3\.$'):
        get_kernel("org/tiny", hub=str(hub))
    with pytest.raises(RevisionNotFound, match=r"no branch or tag '1' .*available versions: v1, v3 \(did you mean "
                                               r"org/tiny@v1\?\)"):
        get_kernel("org/tiny@1", hub=str(hub))
    with pytest.raises(FileNotFoundError, match=r"no kernel repo org/nope on local hub"):
        get_kernel("org/nope", hub=str(hub))  # not "no version given": there is nothing to pin
    with pytest.raises(FileNotFoundError, match=r"no kernel repo org/nope"):
        get_kernel_variants("org/nope", hub=str(hub))
    assert not has_kernel("org/nope", hub=str(hub))


def test_unknown_version_lists_the_available_ones(kernel, hub):
    kernel.publish(hub, "--branch", "v3", "--force")
    with pytest.raises(RevisionNotFound, match=r"org/tiny has no version 2 on local hub .*; available versions: v1, v3"):
        get_kernel("org/tiny@v2", hub=str(hub))
    with pytest.raises(ValueError, match=r"no branch or tag 'beta'.*available versions: v1, v3; other branches: main"):
        get_kernel("org/tiny", revision="beta", hub=str(hub))
    with pytest.raises(ValueError, match=f"has no commit {'0' * 40}"):
        get_kernel(f"org/tiny@{'0' * 40}", hub=str(hub))


def test_unknown_repo(hub):
    with pytest.raises(FileNotFoundError, match=r"no kernel repo org/nope on local hub .*kernels/org/nope.git"):
        get_kernel("org/nope@v1", hub=str(hub))


def test_no_fit_explains_itself_and_points_to_a_version_that_fits(kernel, hub):
    shutil.rmtree(kernel.root / "build")
    kernel.write(version=2, backends=("rocm",)).build().publish(hub)
    with pytest.raises(FileNotFoundError) as err:
        get_kernel("org/tiny@v1", hub=str(hub), system=ROCM)
    message = str(err.value)
    head, *lines = message.splitlines()
    assert "no variant of org/tiny@v1 fits this system (torch 2.14, rocm63, x86_64-linux" in head
    assert "torch214-cxx11-rocm63-x86_64-linux, or torch-rocm" in head
    assert branch_head(hub, "org/tiny", "v1")[:12] in head and str(hub) in head
    assert lines == [
        "  torch-cpu: rejected (built for cpu, this system uses rocm)",
        "  torch-cuda: rejected (built for cuda, this system uses rocm)",
        'Another version fits: v2 has torch-rocm (get_kernel("org/tiny@v2"))',
    ]
    assert get_kernel("org/tiny@v2", hub=str(hub), system=ROCM).double(1) == 2


def test_no_fit_anywhere(hub):
    with pytest.raises(FileNotFoundError, match=r"(?s)rejected.*No other version of org/tiny fits either"):
        get_kernel("org/tiny@v1", hub=str(hub), system=ROCM)


# -- integrity ---------------------------------------------------------------------------------------


def tamper_and_load(hub, path, message):
    """The next load notices, warns naming what failed verification, fetches the variant again
    and runs the published code."""
    new_process()
    with pytest.warns(UserWarning, match=message + ".*fetched it again"):
        module = get_kernel("org/tiny@v1", hub=str(hub))
    assert module.double(1) == 2 and "injected" not in (path / "_ops.py").read_text()
    assert not (path / "extra.py").exists()
    assert not list(path.parent.glob(".doubtful-*")) and not list(path.parent.glob(".tmp-*"))


def test_a_changed_cached_file_is_fetched_again(hub):
    path = install_kernel("org/tiny@v1", hub=str(hub))
    (path / "_ops.py").write_text((path / "_ops.py").read_text() + "import os  # injected\n")
    tamper_and_load(hub, path, rf"{CHOSEN}: _ops.py was changed after it was downloaded and verified")


def test_a_same_size_edit_with_its_mtime_restored_is_caught(hub):
    path = install_kernel("org/tiny@v1", hub=str(hub))
    ops = path / "_ops.py"
    st, text = ops.stat(), ops.read_text()
    ops.write_text(text.replace("ops", "op2", 1) if "ops" in text else text[:-1] + "#")
    os.utime(ops, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert ops.stat().st_size == st.st_size and ops.stat().st_mtime_ns == st.st_mtime_ns
    tamper_and_load(hub, path, "_ops.py was changed")


def test_a_file_replaced_by_a_link_is_caught(hub, tmp_path):
    path = install_kernel("org/tiny@v1", hub=str(hub))
    ops = path / "_ops.py"
    twin = tmp_path / "twin.py"
    twin.write_text(ops.read_text().replace("ops", "op2", 1))
    st = ops.stat()
    os.utime(twin, ns=(st.st_atime_ns, st.st_mtime_ns))
    ops.unlink()
    ops.symlink_to(twin)
    tamper_and_load(hub, path, "is no longer a regular file")


def test_a_forged_verification_record_is_not_trusted(hub):
    """Edit a file, then rewrite the marker (stats and hash of the edit) and metadata.json's digest
    to match: without this user's key the marker does not verify, and metadata.json is then held
    against the hub's copy."""
    path = install_kernel("org/tiny@v1", hub=str(hub))
    ops = path / "_ops.py"
    ops.write_text(ops.read_text() + "import os  # injected\n")
    meta = json.loads((path / "metadata.json").read_text())
    meta["digest"]["files"]["_ops.py"] = digest_tree(path)["_ops.py"]
    (path / "metadata.json").write_text(json.dumps(meta))
    marker = path.with_name(f"{CHOSEN}.verified")
    forged = json.loads(marker.read_text())
    for rel in ("_ops.py", "metadata.json"):
        st = (path / rel).stat()
        forged["files"][rel] = [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, digest_tree(path).get(rel)
                                or forged["files"][rel][4]]
    marker.write_text(json.dumps(forged))
    tamper_and_load(hub, path, "metadata.json does not match the hub's copy")


def test_added_removed_and_metadata_changes_are_caught(hub):
    path = install_kernel("org/tiny@v1", hub=str(hub))
    (path / "extra.py").write_text("")
    tamper_and_load(hub, path, "extra.py was added")
    (path / "_ops.py").unlink()
    tamper_and_load(hub, path, "_ops.py is missing")
    meta = json.loads((path / "metadata.json").read_text())
    (path / "metadata.json").write_text(json.dumps({**meta, "digest": {"algorithm": "sha256", "files": {}}}))
    tamper_and_load(hub, path, "metadata.json was changed")


def test_a_doubtful_copy_and_an_unreachable_hub_say_both(hub, tmp_path):
    path = install_kernel("org/tiny@v1", hub=str(hub))
    (path / "_ops.py").write_text("import os  # injected\n")
    sha = branch_head(hub, "org/tiny", "v1")
    hub.rename(tmp_path / "hub-gone")
    new_process()
    with pytest.raises(IntegrityError, match=r"_ops.py was changed after it was downloaded and verified; "
                                             r"that cached copy was removed .* A fresh copy must come from .*, "
                                             r"and fetching it failed"):
        get_kernel(f"org/tiny@{sha}", hub=str(hub))
    assert not any(n.startswith("_tiny_") for n in sys.modules)


def test_touched_but_unchanged_files_load_and_are_re_recorded(hub):
    path = install_kernel("org/tiny@v1", hub=str(hub))
    marker = path.with_name(f"{CHOSEN}.verified")
    before = json.loads(marker.read_text())
    os.utime(path / "_ops.py", ns=(1, 1))
    assert get_kernel("org/tiny@v1", hub=str(hub)).double(1) == 2
    after = json.loads(marker.read_text())
    assert after["files"]["_ops.py"][1] == 1 and after["files"]["_ops.py"][4] == before["files"]["_ops.py"][4]


def test_a_lost_marker_is_rebuilt_from_the_digest(hub):
    path = install_kernel("org/tiny@v1", hub=str(hub))
    path.with_name(f"{CHOSEN}.verified").unlink()
    assert get_kernel("org/tiny@v1", hub=str(hub)).double(1) == 2
    assert path.with_name(f"{CHOSEN}.verified").is_file()


def test_a_published_variant_that_does_not_match_its_digest_is_never_cached(kernel, tmp_path, runtime_env):
    (kernel.variant(CHOSEN) / "_ops.py").write_text("import os  # changed after the build\n")
    hub = tmp_path / "hub"
    # kbuild publish refuses such a variant (tests/integration/test_publish_integrity.py); another tool may not.
    kernel.publish(hub, "--variant", OTHER)
    upload_as_another_builder(hub, "org/tiny", "v1", kernel.variant(CHOSEN))
    with pytest.raises(IntegrityError, match="_ops.py does not match metadata.json's digest"):
        get_kernel("org/tiny@v1", hub=str(hub))
    assert cached_variants(runtime_env) == []
    assert not list(runtime_env.rglob(".tmp-*"))


# -- the warm path, unreachable hubs, offline ------------------------------------------------------


class CountingGit:
    """Counts the git commands the local hub reader runs (its only way of reading the hub)."""

    def __init__(self, monkeypatch):
        from kbuild.hubs.local_git import BareRepo

        self.calls: list[tuple] = []
        real = BareRepo.git

        def counted(repo, *args, **kw):
            self.calls.append(args[:1])
            return real(repo, *args, **kw)

        monkeypatch.setattr(BareRepo, "git", counted)


def test_a_pinned_load_from_the_cache_reads_nothing_from_the_hub(hub, monkeypatch):
    sha = branch_head(hub, "org/tiny", "v1")
    get_kernel(f"org/tiny@{sha}", hub=str(hub))
    new_process()
    git_calls = CountingGit(monkeypatch)
    assert get_kernel(f"org/tiny@{sha}", hub=str(hub)).double(2) == 4
    assert git_calls.calls == []
    new_process()
    get_kernel("org/tiny@v1", hub=str(hub))
    assert git_calls.calls == [("for-each-ref",)]  # a branch: the refs, nothing else
    get_kernel("org/tiny@v1", hub=str(hub))
    assert git_calls.calls == [("for-each-ref",)]  # resolved once per process


def test_an_unreachable_hub_falls_back_to_the_last_resolution(hub, tmp_path):
    get_kernel("org/tiny@v1", hub=str(hub))
    new_process()
    hub.rename(tmp_path / "hub-away")
    with pytest.warns(UserWarning, match=r"does not exist \(publish to it .*\); using the refs of org/tiny recorded") as w:
        assert get_kernel("org/tiny@v1", hub=str(hub)).double(3) == 6
    assert w[0].filename == __file__  # attributed to the caller, not to kbuild


def test_concurrent_cold_loads_download_once(http_hub, server, runtime_env):
    """16 processes ask for the same uncached kernel at once: all succeed, one downloads."""
    mark = server.mark()
    code = ("import kbuild, sys; from kbuild.variants import SystemInfo; "
            "p = kbuild.install_kernel(sys.argv[1], hub=sys.argv[2], system=SystemInfo((2, 14), 'cuda', (13, 0), "
            "'x86_64', 'linux')); print(p)")
    env = {**os.environ, "KBUILD_CACHE": str(runtime_env.parent), "HF_HUB_DISABLE_TELEMETRY": "1"}
    procs = [subprocess.Popen([sys.executable, "-c", code, f"{http_hub}@v1", server.url], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(16)]
    outputs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * 16, [o[1][-500:] for o in outputs]
    assert len({o[0] for o in outputs}) == 1
    downloads = [r for r in server.requests(mark) if "/resolve/" in r and r.startswith("GET")]
    assert sorted(downloads) == sorted(f"GET /kernels/{http_hub}/resolve/{sha}/build/torch-cuda/{f}"
                                       for sha in [downloads[0].split("/")[5]]
                                       for f in ("__init__.py", "_ops.py", "metadata.json"))
    assert cached_variants(runtime_env) == ["torch-cuda"]


# -- over HTTP (`kbuild hub serve`) ----------------------------------------------------------------


def test_get_kernel_over_http(http_hub, server, runtime_env):
    mark = server.mark()
    module = get_kernel(f"{http_hub}@v1", hub=server.url, trust_remote_code=True)
    assert module.double(4) == 8
    requests = server.requests(mark)
    # the refs, then one recursive listing of the commit, which both the choice and the fetch read
    sha = requests[1].split("/")[6].split("?")[0]
    assert [r.split("?")[0] for r in requests[:2]] == [f"GET /api/kernels/{http_hub}/refs",
                                                        f"GET /api/kernels/{http_hub}/tree/{sha}"]
    assert not [r for r in requests[2:] if "/tree/" in r], requests
    assert not [r for r in requests if OTHER in r]  # only the chosen variant
    assert cached_variants(runtime_env) == [CHOSEN]


def test_http_warm_paths_count_requests(http_hub, server):
    get_kernel(f"{http_hub}@v1", hub=server.url, trust_remote_code=True)
    sha = server.requests()[-1].split("/resolve/")[1].split("/")[0]
    new_process()
    mark = server.mark()
    get_kernel(f"{http_hub}@{sha}", hub=server.url, trust_remote_code=True)
    assert server.requests(mark) == []  # pinned and cached: no request at all
    new_process()
    mark = server.mark()
    get_kernel(f"{http_hub}@v1", hub=server.url, trust_remote_code=True)
    get_kernel(f"{http_hub}@v1", hub=server.url, trust_remote_code=True)
    assert server.requests(server.mark() and mark) == [f"GET /api/kernels/{http_hub}/refs"]


def test_http_hub_from_hf_endpoint_and_errors(http_hub, server, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", server.url)
    with pytest.raises(RevisionNotFound, match=r"no version 7 on hub http://127.0.0.1:\d+; available versions: v1"):
        get_kernel(f"{http_hub}@v7", trust_remote_code=True)
    with pytest.raises(FileNotFoundError, match=r"no kernel repo org/absent on hub http"):
        get_kernel("org/absent@v1", trust_remote_code=True)
    with pytest.raises(RevisionNotFound, match="no such revision"):
        get_kernel(f"{http_hub}@{'0' * 40}", trust_remote_code=True)
    with pytest.raises(FileNotFoundError, match=r"(?s)no variant of .* fits.*torch-cpu: rejected"):
        get_kernel(f"{http_hub}@v1", trust_remote_code=True, system=ROCM)
    assert get_kernel(f"{http_hub}@v1", trust_remote_code=True).double(1) == 2


def test_offline_never_asks_the_server(http_hub, server, monkeypatch):
    monkeypatch.setenv("KBUILD_OFFLINE", "1")
    with pytest.raises(OfflineMiss, match="never resolved .* offline mode is on"):
        get_kernel(f"{http_hub}@v1", hub=server.url, trust_remote_code=True)
    monkeypatch.delenv("KBUILD_OFFLINE")
    get_kernel(f"{http_hub}@v1", hub=server.url, trust_remote_code=True)
    new_process()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    mark = server.mark()
    assert get_kernel(f"{http_hub}@v1", hub=server.url, trust_remote_code=True).double(5) == 10
    with pytest.raises(OfflineMiss, match=f"build/{OTHER} is not in the cache"):
        get_kernel(f"{http_hub}@v1", hub=server.url, trust_remote_code=True, backend=OTHER.removeprefix("torch-"))
    assert not has_kernel(f"{http_hub}@v2", hub=server.url)
    assert server.requests(mark) == []


def test_a_server_that_went_away_falls_back_with_a_warning(kernel, tmp_path, monkeypatch):
    own, stop = start_server(tmp_path / "own")
    monkeypatch.setenv("HF_TOKEN", own.token)
    kernel.publish(own.url)
    monkeypatch.delenv("HF_TOKEN")
    get_kernel("org/tiny@v1", hub=own.url, trust_remote_code=True)
    new_process()
    stop()
    with pytest.warns(UserWarning, match="using the refs of .* recorded when it was last reached"):
        assert get_kernel("org/tiny@v1", hub=own.url, trust_remote_code=True).double(1) == 2



@pytest.mark.parametrize("tamper", ["change", "add", "remove", "change, and the listing memo gone"])
def test_a_tampered_cache_with_the_server_gone_says_what_failed_first(kernel, tmp_path, monkeypatch, runtime_env,
                                                                      tamper):
    """The cached copy fails its check while the hub is down: the refusal names the file and the variant,
    that the copy was removed, then what a fresh copy needs (issue 35)."""
    own, stop = start_server(tmp_path / "own")
    monkeypatch.setenv("HF_TOKEN", own.token)
    kernel.publish(own.url)
    monkeypatch.delenv("HF_TOKEN")
    monkeypatch.setenv("KBUILD_TRUSTED_ORGS", f"org@{own.url}")
    path = install_kernel("org/tiny@v1", hub=own.url)
    sha = branch_head(own.root, "org/tiny", "v1")
    what = {"add": "extra.py was added", "remove": "_ops.py is missing"}.get(tamper, "_ops.py was changed")
    if tamper.startswith("change"):
        (path / "_ops.py").write_text("import os  # injected\n")
    elif tamper == "add":
        (path / "extra.py").write_text("")
    else:
        (path / "_ops.py").unlink()
    if tamper.endswith("memo gone"):  # a cache filled by an older kbuild: the hub must list the commit again
        (path.parent / "variants.json").unlink()
    stop()
    new_process()
    with pytest.raises(IntegrityError) as refused:
        get_kernel(f"org/tiny@{sha}", hub=own.url)
    message = str(refused.value)
    assert message.index(what) < message.index(own.url), message  # the cache first, then the hub
    assert f"/{CHOSEN}: " in message and "was removed" in message, message  # the variant, named first
    assert "KBUILD_CACHE" in message and str(runtime_env.parent) in message, message
    assert not path.exists()  # the copy that failed is gone, not left to load later

# -- trust -----------------------------------------------------------------------------------------


def test_untrusted_orgs_need_trust_remote_code(http_hub, server, monkeypatch):
    with pytest.raises(ValueError, match=rf"organisation 'org' is not trusted on {server.url}.*trust_remote_code=True.*"
                                         rf"KBUILD_TRUSTED_ORGS=org@{server.url}.*trusted-orgs"):
        get_kernel(f"{http_hub}@v1", hub=server.url)
    assert get_kernel(f"{http_hub}@v1", hub=server.url, trust_remote_code=[http_hub]).double(1) == 2
    new_process()
    monkeypatch.setenv("KBUILD_TRUSTED_ORGS", "someone, org")  # org on the official Hub, not on this one
    with pytest.raises(ValueError, match="not trusted"):
        get_kernel(f"{http_hub}@v1", hub=server.url)
    monkeypatch.setenv("KBUILD_TRUSTED_ORGS", f"someone, org@{server.url}/")
    assert get_kernel(f"{http_hub}@v1", hub=server.url).double(1) == 2


def test_kernels_community_is_trusted_on_the_official_hub_only(kernel, server, monkeypatch):
    """Finding 3: any endpoint can serve a repo named kernels-community/*."""
    name = f"kernels-community/tiny-{os.urandom(3).hex()}"
    kernel.repo_id = name
    monkeypatch.setenv("HF_TOKEN", server.token)
    kernel.write().build().publish(server.url, "--repo-id", name)
    monkeypatch.delenv("HF_TOKEN")
    with pytest.raises(ValueError, match=rf"'kernels-community' is not trusted on {server.url}"):
        get_kernel(f"{name}@v1", hub=server.url)
    assert get_kernel(f"{name}@v1", hub=server.url, trust_remote_code=True).double(1) == 2


def test_trusted_orgs_from_the_config_file(http_hub, server, runtime_env):
    config = runtime_env.parent.parent / "config" / "kbuild" / "trusted-orgs"
    config.parent.mkdir(parents=True)
    config.write_text(f"# orgs I trust\norg  # on the official Hub\norg@{server.url}  # mine\n")
    assert get_kernel(f"{http_hub}@v1", hub=server.url).double(1) == 2


def test_local_hub_repos_are_trusted_and_listing_needs_no_trust(hub, http_hub, server):
    assert get_kernel("org/tiny@v1", hub=str(hub)).double(1) == 2  # no trust_remote_code
    assert has_kernel(f"{http_hub}@v1", hub=server.url)
    assert install_kernel(f"{http_hub}@v1", hub=server.url).is_dir()


def test_import_kbuild_stays_light():
    code = ("import kbuild, sys; heavy = [m for m in ('torch', 'huggingface_hub', 'subprocess', 'builder', "
            "'setuptools', 'ninja') if m in sys.modules]; assert not heavy, heavy")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(kbuild.__file__).parent.parent)


@pytest.fixture
def read_only_view(tmp_path):
    """`view(folder)`: the folder bind-mounted read-only (EROFS for every write, root included)."""
    mounts = []

    def view(folder: Path) -> Path:
        target = tmp_path / f"ro-{len(mounts)}"
        target.mkdir()
        done = subprocess.run(["mount", "--bind", str(folder), str(target)], capture_output=True, text=True)
        if done.returncode:
            pytest.skip(f"cannot bind-mount here: {done.stderr.strip()}")
        mounts.append(target)
        subprocess.run(["mount", "-o", "remount,bind,ro", str(target)], check=True)
        return target

    yield view
    for target in mounts:
        subprocess.run(["umount", str(target)], check=False)


def test_a_read_only_populated_cache_loads_branches_and_pinned_commits(hub, runtime_env, monkeypatch, read_only_view):
    sha = branch_head(hub, "org/tiny", "v1")
    assert get_kernel("org/tiny@v1", hub=str(hub)).VARIANT == "?"
    assert get_kernel(f"org/tiny@{sha}", hub=str(hub)).VARIANT == "?"
    frozen = read_only_view(runtime_env.parent)  # runtime_env is <KBUILD_CACHE>/kernels
    with pytest.raises(OSError, match="Read-only"):
        (frozen / "probe").write_text("x")
    monkeypatch.setenv("KBUILD_CACHE", str(frozen))
    for request in ("org/tiny@v1", f"org/tiny@{sha}"):  # online: the refs record cannot be rewritten
        new_process()
        assert get_kernel(request, hub=str(hub)).VARIANT == "?"
    monkeypatch.setenv("KBUILD_OFFLINE", "1")
    new_process()
    assert get_kernel("org/tiny@v1", hub=str(hub)).VARIANT == "?"
