"""Pure unit tests of the loader's parts: pins, ref resolution, settings, hub addresses, path
safety, trust, the no-fit message and layer references. No process, hub or network."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from kbuild import hubs
from kbuild.choice import resolve as judge
from kbuild.digest import is_bytecode
from kbuild.errors import RevisionNotFound
from kbuild.hub_loader import Resolution, no_fit_message
from kbuild.hubs import cache_folder_name, safe_relpath
from kbuild.hubs.http import HttpHubReader
from kbuild.hubs.local_git import LocalGitHub
from kbuild.layers.repository import parse_shorthand
from kbuild.refs import KernelRef, Refs, parse_request, resolve
from kbuild.settings import BUILTIN_TRUSTED_ORGS, Settings, from_environment, parse_local_kernels
from kbuild.trust import check_trust
from kbuild.variants import SystemInfo

SHA = "0123456789abcdef0123456789abcdef01234567"
REFS = Refs({"main": "a" * 40, "v1": "b" * 40, "v3": "c" * 40, "dev": "d" * 40}, {"release": "e" * 40})


@pytest.mark.parametrize("repo_id, kwargs, expected", [
    ("org/k@v3", {}, KernelRef("org/k", "v3")),
    ("org/k", {"version": 3}, KernelRef("org/k", "v3")),
    ("org/k", {"revision": "dev"}, KernelRef("org/k", "dev")),
    ("org/k", {"revision": "refs/heads/v1"}, KernelRef("org/k", "v1")),
    (f"org/k@{SHA}", {}, KernelRef("org/k", SHA)),
    (f"org/k@{SHA.upper()}", {}, KernelRef("org/k", SHA)),
    ("kernels-community/activation.v2@release", {}, KernelRef("kernels-community/activation.v2", "release")),
])
def test_parse_request(repo_id, kwargs, expected):
    assert parse_request(repo_id, **kwargs) == expected


def test_kernel_ref_properties():
    assert KernelRef("o/k", "v12").version == 12 and not KernelRef("o/k", "v12").is_commit
    assert KernelRef("o/k", SHA).is_commit and KernelRef("o/k", SHA).version is None
    assert KernelRef("o/k", "dev").version is None and str(KernelRef("o/k", "dev")) == "o/k@dev"


@pytest.mark.parametrize("kwargs, message", [
    ({"repo_id": "org/k"}, r'no version given\. Pin one.*get_kernel\("org/k@v1"\).*version=1.*revision=.*\)\.$'),
    ({"repo_id": "org/k@v1", "revision": "v1"}, "pin the kernel once"),
    ({"repo_id": "org/k", "version": True}, "non-negative integer"),
    ({"repo_id": "org/k", "version": "1"}, "non-negative integer"),
    ({"repo_id": "org/k", "revision": "a b"}, "is not a branch, tag or commit"),
    ({"repo_id": "org/k", "revision": "../x"}, "is not a branch, tag or commit"),
    ({"repo_id": "/k@v1"}, "not a kernel repo id"),
    ({"repo_id": "org/k/x@v1"}, "not a kernel repo id"),
])
def test_parse_request_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        parse_request(**kwargs)


def test_resolve_against_refs():
    assert resolve(KernelRef("o/k", "v1"), REFS, "hub X") == "b" * 40
    assert resolve(KernelRef("o/k", "release"), REFS, "hub X") == "e" * 40
    assert resolve(KernelRef("o/k", SHA), REFS, "hub X") == SHA  # a commit needs no refs
    assert REFS.versions() == {1: "b" * 40, 3: "c" * 40}
    with pytest.raises(RevisionNotFound, match=r"^o/k has no version 2 on hub X; available versions: v1, v3$"):
        resolve(KernelRef("o/k", "v2"), REFS, "hub X")
    with pytest.raises(RevisionNotFound, match=r"no branch or tag 'x' .*versions: v1, v3; other branches: dev, main; "
                                              r"tags: release"):
        resolve(KernelRef("o/k", "x"), REFS, "hub X")
    # a bare number is not a branch: the v<N> it meant is named when there is one
    with pytest.raises(RevisionNotFound, match=r"^o/k has no branch or tag '1' on hub X; available versions: v1, v3 "
                                              r"\(did you mean o/k@v1\?\); other branches"):
        resolve(KernelRef("o/k", "1"), REFS, "hub X")
    with pytest.raises(RevisionNotFound, match=r"available versions: v1, v3 \(a version is pinned as o/k@v<N> or "
                                              r"version=N\); other"):
        resolve(KernelRef("o/k", "2"), REFS, "hub X")
    with pytest.raises(RevisionNotFound, match=r"available versions: none \(no v<N> branch\)"):
        resolve(KernelRef("o/k", "v1"), Refs({"main": "a" * 40}), "hub X")
    assert Refs.from_json(REFS.to_json()) == REFS


def test_settings_from_the_environment(tmp_path):
    (tmp_path / "kbuild").mkdir()
    (tmp_path / "kbuild" / "trusted-orgs").write_text("# mine\nacme  # the lab\n\nbeta\n")
    env = {"KBUILD_HUB": "http://h:1", "HF_ENDPOINT": "http://other", "KBUILD_CACHE": str(tmp_path / "c"),
           "HF_HUB_OFFLINE": "True", "KBUILD_TRUSTED_ORGS": "x, y", "XDG_CONFIG_HOME": str(tmp_path),
           "LOCAL_KERNELS": "o/a=/p/a:o/b=/p/b", "HF_TOKEN": "t"}
    s = from_environment(env)
    assert s.hub == "http://h:1" and s.cache_dir == tmp_path / "c" and s.kernels_cache == tmp_path / "c" / "kernels"
    assert s.offline and s.token == "t"
    assert s.trusted_orgs == BUILTIN_TRUSTED_ORGS + ("x", "y", "acme", "beta")
    assert s.local_kernels == {"o/a": Path("/p/a"), "o/b": Path("/p/b")}
    assert from_environment({"HF_ENDPOINT": "http://other"}).hub == "http://other"
    assert not from_environment({"KBUILD_OFFLINE": "0"}).offline and from_environment({"KBUILD_OFFLINE": "1"}).offline
    assert from_environment({}).hub is None
    with pytest.raises(ValueError, match="LOCAL_KERNELS: bad entry 'o/a'"):
        parse_local_kernels("o/a")


def test_hub_addresses(tmp_path):
    assert isinstance(hubs.open(str(tmp_path)), LocalGitHub) and hubs.open(str(tmp_path)).root == tmp_path
    assert hubs.open(tmp_path.as_uri()).root == tmp_path
    assert hubs.open(None).root.parts[-3:] == (".cache", "kbuild", "hub")
    http = hubs.open("http://127.0.0.1:8000/", token="t")
    assert isinstance(http, HttpHubReader) and http.endpoint == "http://127.0.0.1:8000" and http._api is None
    with pytest.raises(ValueError, match="unsupported hub address"):
        hubs.open("ftp://x")
    with pytest.raises(ValueError, match="has no host"):
        hubs.open("http://")
    assert cache_folder_name("http", "https://huggingface.co") == "huggingface.co"
    assert cache_folder_name("http", "http://127.0.0.1:8000") == "127.0.0.1_8000-http"
    assert cache_folder_name("local", "/a") != cache_folder_name("local", "/b")
    assert cache_folder_name("local", "/a").startswith("local-")


@pytest.mark.parametrize("path", ["../x", "a/../../x", "/etc/passwd", "a\\b", "a//b", "./a", "a/./b", "", "a\0b"])
def test_paths_that_could_escape_are_refused(path):
    with pytest.raises(ValueError, match="could escape the cache folder"):
        safe_relpath(path, "o/k@abc")


def test_plain_paths_pass():
    assert safe_relpath("layers/norm.py", "x") == "layers/norm.py"
    assert is_bytecode("__pycache__/a.pyc") and is_bytecode("a.pyc") and not is_bytecode("a.py")


def test_trust_rules():
    official, other = "https://huggingface.co", "http://127.0.0.1:8000"
    settings = Settings(trusted_orgs=("kernels-community", "acme"))
    check_trust("acme/k", official, False, settings)
    check_trust("kernels-community/activation", official, False, settings)
    check_trust("evil/k", None, False, settings)  # a local hub's repos
    check_trust("evil/k", other, True, settings)
    check_trust("evil/k", other, ["evil/k"], settings)
    with pytest.raises(ValueError, match=r"evil/k: the organisation 'evil' is not trusted.*runs its code"):
        check_trust("evil/k", official, ["evil/other"], settings)
    with pytest.raises(ValueError, match=r"'acme' is not trusted on http://127.0.0.1:8000.*acme@http://127.0.0.1:8000"):
        check_trust("acme/k", other, False, settings)


def test_no_fit_message():
    system = SystemInfo((2, 14), "xpu", (2025, 1), "x86_64", "linux")
    found = Resolution(KernelRef("o/k", "v1"), SHA, "hub X", system, tuple(judge(["torch-cpu", "torch-cuda"], system)))
    assert no_fit_message(found, {2: "torch-xpu", 4: "torch-universal"}).splitlines() == [
        "no variant of o/k@v1 fits this system (torch 2.14, xpu20251, x86_64-linux; its variant would be "
        "torch214-cxx11-xpu20251-x86_64-linux, or torch-xpu for a Python-only kernel). Looked at commit "
        "0123456789ab on hub X; the variants there:",
        "  torch-cpu: rejected (built for cpu, this system uses xpu)",
        "  torch-cuda: rejected (built for cuda, this system uses xpu)",
        'Another version fits: v2 has torch-xpu (get_kernel("o/k@v2")); v4 has torch-universal (get_kernel("o/k@v4"))',
    ]
    empty = Resolution(KernelRef("o/k", "v1"), SHA, "hub X", system, ())
    assert "v1 has no build/ folder: nothing was published there" in no_fit_message(empty, {})


def test_no_fit_message_asks_for_the_build_this_machine_runs():
    # torch 2.15's CUDA build on a machine without a GPU, a kernel with only torch 2.14 builds: a
    # CUDA build could not run here, so the publisher is asked for the CPU one
    system = SystemInfo((2, 15), "cuda", (13, 2), "x86_64", "linux", device_visible=False)
    names = ["torch214-cxx11-cpu-x86_64-linux", "torch214-cxx11-cu132-x86_64-linux"]
    found = Resolution(KernelRef("o/k", "v1"), SHA, "hub X", system, tuple(judge(names, system)))
    message = no_fit_message(found, {})
    assert "its variant would be torch215-cxx11-cpu-x86_64-linux, or torch-cpu for a Python-only kernel" in message
    assert message.endswith("ask its publisher for a build for torch215-cxx11-cpu-x86_64-linux.")
    assert "cu132" not in message.splitlines()[-1]
    seen = replace(system, device_visible=True, gpu_arch="9.0")  # with the GPU: its CUDA build
    assert no_fit_message(replace(found, system=seen), {}).endswith(
        "ask its publisher for a build for torch215-cxx11-cu132-x86_64-linux (a GPU of compute capability 9.0).")


def test_layer_refs():
    from kbuild.layers import LayerRepository

    assert parse_shorthand("RMSNorm", "org/k@v1:RMSNorm", None, False) == LayerRepository(
        "org/k@v1", layer_name="RMSNorm")
    assert parse_shorthand("X", f"org/k@{SHA}:Layer", "h", True) == LayerRepository(
        f"org/k@{SHA}", layer_name="Layer", hub="h", trust_remote_code=True)
    for bad in ("org/k@v1", "org/k@v1:", ":RMSNorm", "org/k@v1:Not-A-Name", "org/k:RMSNorm"):
        with pytest.raises(ValueError, match="is not 'org/repo@v1:LayerName'"):
            parse_shorthand("RMSNorm", bad, None, False)


def test_cache_paths_from_hub_names_are_checked(tmp_path):
    from kbuild.cache import KernelCache

    cache = KernelCache(tmp_path)
    assert cache.variant_dir("h", "o/k", SHA, "torch-cpu") == tmp_path / "h" / "o" / "k" / SHA / "torch-cpu"
    for commit in ("../../etc", "main", SHA[:39]):
        with pytest.raises(ValueError, match="not a hex object id"):
            cache.variant_dir("h", "o/k", commit, "torch-cpu")
    for variant in ("..", "a/b", ".hidden", ""):
        with pytest.raises(ValueError, match="refusing the variant folder name"):
            cache.variant_dir("h", "o/k", SHA, variant)
