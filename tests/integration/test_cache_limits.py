"""The cache's limits and its errors (issue 26): a variant download has a size budget, enforced
before and while it streams, and refusing leaves nothing cached; a doubtful copy with the hub
unreachable says both; a private hub without a token and a read-only cache say what to do."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from hostile_hub import HostileHub
from hubserver import ServerThread
from kbuild import IntegrityError, RepoNotFound, get_kernel, install_kernel
from kbuild.budget import TOTAL_SLACK
from kbuild.errors import CacheNotWritable, InvalidSetting, OversizedDownload, VariantTooLarge
from runtime_hubs import Kernel, new_process, runtime_env, start_server, torch_probes

__all__ = ["runtime_env", "torch_probes"]  # fixtures, used by name


@pytest.fixture
def kernel(tmp_path) -> Kernel:
    return Kernel(tmp_path / "tiny").write().build()


@pytest.fixture
def served(tmp_path, kernel, monkeypatch, runtime_env):
    """org/tiny v1 on a real `kbuild hub serve`, behind a hub that is honest until told otherwise."""
    served, stop = start_server(tmp_path / "served")
    monkeypatch.setenv("HF_TOKEN", served.token)
    kernel.publish(served.url)
    monkeypatch.delenv("HF_TOKEN")
    hub = HostileHub(served.url)
    yield hub
    hub.stop()
    stop()


def nothing_cached(cache: Path) -> bool:
    return not [p for p in cache.rglob("*") if p.is_dir() and p.name.startswith(("torch-", ".tmp-", ".doubtful-"))]


# -- the size budget ---------------------------------------------------------------------------------

def test_a_listing_over_the_cap_is_refused_before_anything_is_downloaded(served, runtime_env):
    served.hostile, served.claim_size = True, 5 << 30  # 5 GiB a file: 15 GiB, over the 8G default
    with pytest.raises(VariantTooLarge, match=r"lists 1\d{10} bytes for this variant, more than KBUILD_MAX_VARIANT_"
                                              r"BYTES allows \(8589934592\); nothing was downloaded"):
        get_kernel("org/tiny@v1", hub=served.url, trust_remote_code=True)
    assert served.downloads == 0 and nothing_cached(runtime_env)


def test_the_cap_comes_from_kbuild_max_variant_bytes(kernel, tmp_path, runtime_env, monkeypatch):
    kernel.publish(tmp_path / "hub")
    monkeypatch.setenv("KBUILD_MAX_VARIANT_BYTES", "1K")
    with pytest.raises(VariantTooLarge, match=r"more than KBUILD_MAX_VARIANT_BYTES allows \(1024\)"):
        get_kernel("org/tiny@v1", hub=str(tmp_path / "hub"))
    assert nothing_cached(runtime_env)
    monkeypatch.setenv("KBUILD_MAX_VARIANT_BYTES", "lots")
    with pytest.raises(InvalidSetting, match="KBUILD_MAX_VARIANT_BYTES: expected a positive byte count such as 8G"):
        get_kernel("org/tiny@v1", hub=str(tmp_path / "hub"))
    monkeypatch.setenv("KBUILD_MAX_VARIANT_BYTES", "1M")
    assert get_kernel("org/tiny@v1", hub=str(tmp_path / "hub")).double(1) == 2


def test_bytes_past_the_listing_are_cut_off_while_streaming(served, runtime_env):
    """The listing claims 1 byte a file and the hub streams each with 4 MiB more: the bytes are
    counted as they arrive, against the file's listed size and the variant's budget (its
    listing's total plus TOTAL_SLACK, shared by the parallel downloads; tests/unit/
    test_variant_budget.py), so the download stops long before the 4 MiB of any file."""
    served.hostile, served.claim_size, served.padding = True, 1, 4 << 20
    with pytest.raises(OversizedDownload, match=r"the hub sent more than (the 1 bytes it listed|this variant's budget "
                                                f"of {3 + TOTAL_SLACK} bytes)"):
        get_kernel("org/tiny@v1", hub=served.url, trust_remote_code=True)
    assert nothing_cached(runtime_env)
    served.hostile = False
    new_process()
    assert get_kernel("org/tiny@v1", hub=served.url, trust_remote_code=True).double(1) == 2


# -- what the errors say -----------------------------------------------------------------------------

def test_a_doubtful_copy_with_the_hub_gone_says_both(served, runtime_env):
    path = install_kernel("org/tiny@v1", hub=served.url)
    sha = path.parent.name  # <hub>/<org>/<name>/<commit>/<variant>
    (path / "_ops.py").write_text("import os  # injected\n")
    served.stop()
    new_process()
    with pytest.raises(IntegrityError, match=r"_ops.py was changed after it was downloaded and verified; that cached "
                                             r"copy was removed .* A fresh copy must come from hub http://\S+, and "
                                             r"fetching it failed: cannot list the files at \w+ of org/tiny on "
                                             r"hub http://\S+: .*Connection refused"):
        get_kernel(f"org/tiny@{sha}", hub=served.url, trust_remote_code=True)
    assert nothing_cached(runtime_env)  # refused: removed, though nothing replaced it


def test_an_unverifiable_copy_with_the_hub_gone_says_both_and_is_kept(kernel, tmp_path, runtime_env):
    hub = tmp_path / "hub"
    kernel.publish(hub)
    path = install_kernel("org/tiny@v1", hub=str(hub))
    path.with_name(path.name + ".verified").unlink()  # e.g. another user's cache: nothing vouches for it
    hub.rename(tmp_path / "hub-away")
    new_process()
    with pytest.raises(IntegrityError, match=r"verification record is missing or not signed by this user, and "
                                             r"re-verifying it needs the hub: local hub .* does not exist.*; that "
                                             r"cached copy is kept .* A fresh copy must come from local hub .*, and "
                                             r"fetching it failed"), \
            pytest.warns(UserWarning, match="using the refs of org/tiny recorded"):
        get_kernel("org/tiny@v1", hub=str(hub))
    assert path.is_dir()  # not refused, only not verifiable now: kept for when the hub is back
    (tmp_path / "hub-away").rename(hub)
    new_process()
    assert get_kernel("org/tiny@v1", hub=str(hub)).double(1) == 2
    assert path.with_name(path.name + ".verified").is_file()


def test_a_private_hub_without_a_token_names_the_token(tmp_path, kernel, runtime_env, monkeypatch):
    server = ServerThread(tmp_path / "private", public_read=False)
    try:
        from hubserver import TOKEN

        monkeypatch.setenv("HF_TOKEN", TOKEN)
        kernel.publish(server.url)
        monkeypatch.delenv("HF_TOKEN")
        # the hub asked for a token (401), and says it is kbuild's: its token file, not a Hugging Face login
        with pytest.raises(RepoNotFound, match=r"no kernel repo org/tiny on hub .*; if it is private, no token was "
                                               r"sent: this hub \(kbuild hub serve\) takes its tokens from its token "
                                               r"file, not from a Hugging Face login: HF_TOKEN=\$\(cat ROOT/.token\)"):
            get_kernel("org/tiny@v1", hub=server.url, trust_remote_code=True)
        monkeypatch.setenv("HF_TOKEN", "kb_not_a_token")
        with pytest.raises(OSError, match="HF_TOKEN|token"):
            get_kernel("org/tiny@v1", hub=server.url, trust_remote_code=True)
        monkeypatch.setenv("HF_TOKEN", TOKEN)
        assert get_kernel("org/tiny@v1", hub=server.url, trust_remote_code=True).double(1) == 2
    finally:
        server.stop()


@pytest.fixture
def read_only(tmp_path):
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


def test_an_empty_read_only_cache_names_kbuild_cache(kernel, tmp_path, runtime_env, monkeypatch, read_only):
    kernel.publish(tmp_path / "hub")
    empty = tmp_path / "empty-cache"
    empty.mkdir()
    monkeypatch.setenv("KBUILD_CACHE", str(read_only(empty)))
    with pytest.raises(CacheNotWritable, match=r"org/tiny@\w+ build/torch-\w+ is not in the kernel cache, and the "
                                               r"cache cannot be written \(Read-only file system: .*set KBUILD_CACHE"):
        get_kernel("org/tiny@v1", hub=str(tmp_path / "hub"))
    assert issubclass(CacheNotWritable, OSError)


def test_a_public_hub_without_the_repo_says_only_that(served, runtime_env):
    """A 404 is a repo that is not there: no word of private repos or tokens (said only on a 401)."""
    with pytest.raises(RepoNotFound) as raised:
        get_kernel("org/absent@v1", hub=served.url, trust_remote_code=True)
    assert str(raised.value) == f"no kernel repo org/absent on hub {served.url}"


def test_a_hub_that_is_not_running_is_named_with_what_to_do(runtime_env):
    import socket

    from kbuild.errors import HubUnreachable

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    with pytest.raises(HubUnreachable) as raised:
        get_kernel("org/tiny@v1", hub=url, trust_remote_code=True)
    message = str(raised.value)
    assert f"hub {url}" in message and "Connection refused" in message, message
    assert message.endswith("; is the hub running? Start one with `kbuild hub serve`, or check its address: hub=, "
                            "else KBUILD_HUB, else HF_ENDPOINT"), message
