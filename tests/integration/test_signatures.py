"""Signed publishes and the require-signature rule (issue 31, part 3), with the real parts: keys
made by the real ssh-keygen, `kbuild publish --sign` into a real local git hub and a real `kbuild
hub serve`, get_kernel and `kbuild verify` against them, and Hugging Face's `kernels` 0.16 to 0.19
loading a signed variant.

Every refusal is one line naming the signer (when there is one), the rule and where it was set,
and leaves nothing of the refused variant in the cache.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import torch

import hf_envs
from builder.commands.main import main
from kbuild import get_kernel
from kbuild.errors import SignatureRefused
from runtime_hubs import Kernel, new_process, runtime_env, start_server, torch_probes, upload_as_another_builder
from ssh_signers import allowed_signers, fingerprint, keygen

__all__ = ["runtime_env", "torch_probes"]  # fixtures, used by name

pytestmark = pytest.mark.usefixtures("runtime_env")

CHOSEN = "torch-cuda" if torch.cuda.is_available() else "torch-cpu"


@pytest.fixture
def keys(tmp_path) -> dict[str, Path]:
    return {"alice": keygen(tmp_path / "keys", "alice"), "mallory": keygen(tmp_path / "keys", "mallory")}


@pytest.fixture
def trusted(tmp_path, keys, monkeypatch) -> Path:
    """org trusts alice (KBUILD_ALLOWED_SIGNERS)."""
    listing = allowed_signers(tmp_path / "org.allowed_signers", **{"alice@example.com": keys["alice"]})
    monkeypatch.setenv("KBUILD_ALLOWED_SIGNERS", f"org={listing}")
    return listing


@pytest.fixture
def kernel(tmp_path) -> Kernel:
    return Kernel(tmp_path / "tiny").write().build()


def publish(kernel: Kernel, hub, *args: str) -> str:
    return kernel.publish(hub, *args)


def hub_file(hub: Path, rev: str, path: str) -> bytes:
    bare = hub / "kernels" / "org" / "tiny.git"
    return subprocess.run(["git", "--git-dir", str(bare), "show", f"{rev}:{path}"], check=True,
                          capture_output=True).stdout


def cached(cache: Path) -> list[str]:
    return sorted(p.name for p in cache.glob("*/*/*/*/*") if p.is_dir())


def refused(call) -> str:
    with pytest.raises(SignatureRefused) as caught:
        call()
    message = str(caught.value)
    assert "\n" not in message and "Traceback" not in message
    return message


# -- signing -------------------------------------------------------------------------------------

def hub_paths(hub: Path, rev: str) -> list[str]:
    bare = hub / "kernels" / "org" / "tiny.git"
    return subprocess.run(["git", "--git-dir", str(bare), "ls-tree", "-r", "--name-only", rev], check=True,
                          capture_output=True, text=True).stdout.split()


def test_publish_sign_puts_an_ssh_signature_of_metadata_json_in_signatures(tmp_path, kernel, keys, trusted, capsys):
    """The signature is `signatures/<variant>/metadata.json.sig`, outside the variant folder (where Hugging
    Face's kernels 0.18+ allow no file its digest lacks); a publish owns that folder with the variant's."""
    hub = tmp_path / "hub"
    assert main(["publish", str(kernel.root), "--hub", str(hub), "--dry-run", "--sign", "--sign-key",
                 str(keys["alice"])]) == 0
    assert "  add      signatures/torch-cpu/metadata.json.sig" in capsys.readouterr().out  # the plan shows it
    commit = publish(kernel, hub, "--sign", "--sign-key", str(keys["alice"]))
    for variant in ("torch-cpu", "torch-cuda"):
        (tmp_path / "check").mkdir(exist_ok=True)
        meta = hub_file(hub, commit, f"build/{variant}/metadata.json")
        sig = tmp_path / "check" / f"{variant}.sig"
        sig.write_bytes(hub_file(hub, commit, f"signatures/{variant}/metadata.json.sig"))
        # git's own tool, as a user would check it by hand
        done = subprocess.run(["ssh-keygen", "-Y", "verify", "-f", str(trusted), "-I", "alice@example.com",
                               "-n", "kbuild", "-s", str(sig)], input=meta, capture_output=True)
        assert done.returncode == 0, done.stderr
        assert meta == (kernel.variant(variant) / "metadata.json").read_bytes()  # the build's own bytes
    assert [p for p in hub_paths(hub, commit) if not p.startswith("build/")] == [
        "signatures/torch-cpu/metadata.json.sig", "signatures/torch-cuda/metadata.json.sig"]
    assert not list(kernel.root.glob("build/*/metadata.json.sig"))  # the build folder is not touched

    # republished unsigned: the stale signatures go with it
    commit = publish(kernel, hub)
    assert not [p for p in hub_paths(hub, commit) if not p.startswith("build/")]
    # a variant an older kbuild signed in its folder: republishing it moves the signature out
    old = tmp_path / "old" / "torch-cpu"
    shutil.copytree(kernel.variant("torch-cpu"), old)
    subprocess.run(["ssh-keygen", "-Y", "sign", "-n", "kbuild", "-f", str(keys["alice"]), str(old / "metadata.json")],
                   check=True, capture_output=True)
    assert "build/torch-cpu/metadata.json.sig" in hub_paths(hub, upload_as_another_builder(hub, "org/tiny", "v1", old))
    commit = publish(kernel, hub, "--sign", "--sign-key", str(keys["alice"]), "--variant", "torch-cpu")
    assert [p for p in hub_paths(hub, commit) if p.endswith(".sig")] == ["signatures/torch-cpu/metadata.json.sig"]


def test_the_signing_key_comes_from_the_flag_the_variable_or_the_signatures_file(tmp_path, kernel, keys, monkeypatch,
                                                                                 capsys):
    hub = tmp_path / "hub"
    monkeypatch.setenv("KBUILD_SIGNING_KEY", str(keys["alice"]))
    publish(kernel, hub, "--sign")
    assert "with " + str(keys["alice"]) + " (KBUILD_SIGNING_KEY)" in capsys.readouterr().err
    monkeypatch.delenv("KBUILD_SIGNING_KEY")
    config = tmp_path / "config" / "kbuild"
    config.mkdir(parents=True)
    (config / "signatures").write_text(f"# the publisher's key\nsign-key {keys['mallory']}\n")
    kernel.write(variant="again").build()
    publish(kernel, hub, "--sign")
    assert f"with {keys['mallory']} ({config / 'signatures'}:2)" in capsys.readouterr().err

    # no key anywhere, a missing key file, --sign-key alone: one line each, exit 2
    (config / "signatures").write_text("")
    assert main(["publish", str(kernel.root), "--hub", str(hub), "--sign"]) == 2
    err = capsys.readouterr().err.strip()
    assert "--sign: no signing key: pass --sign-key KEY_FILE, set KBUILD_SIGNING_KEY, or add a line" in err
    assert len(err.splitlines()) <= 2 and "Traceback" not in err
    assert main(["publish", str(kernel.root), "--hub", str(hub), "--sign", "--sign-key", str(tmp_path / "nokey")]) == 2
    assert f"--sign-key: {tmp_path / 'nokey'} is not a file" in capsys.readouterr().err
    assert main(["publish", str(kernel.root), "--hub", str(hub), "--sign-key", str(keys["alice"])]) == 2
    assert "--sign-key: given without --sign" in capsys.readouterr().err


# -- the require-signature rule --------------------------------------------------------------------

def test_a_variant_signed_by_a_trusted_key_loads_under_the_rule(tmp_path, kernel, keys, trusted, runtime_env):
    hub = tmp_path / "hub"
    publish(kernel, hub, "--sign", "--sign-key", str(keys["alice"]))
    module = get_kernel("org/tiny@v1", hub=str(hub), require_signature=True)
    assert module.double(21) == 42
    assert (Path(module.__file__).parent / "metadata.json.sig").is_file()  # cached beside its metadata.json
    new_process()
    assert get_kernel("org/tiny@v1", hub=str(hub), require_signature=True).double(2) == 4  # the cached copy


def test_unsigned_is_refused_and_nothing_is_cached(tmp_path, kernel, trusted, runtime_env):
    hub = tmp_path / "hub"
    publish(kernel, hub)
    message = refused(lambda: get_kernel("org/tiny@v1", hub=str(hub), require_signature=True))
    assert message.startswith("org/tiny@") and f"build/{CHOSEN}: unsigned" in message
    assert "refused by the require-signature rule for org (set by require_signature=True)" in message
    assert str(trusted) in message  # the trusted signers it would have taken
    assert cached(runtime_env) == []
    # without the rule nothing changes
    assert get_kernel("org/tiny@v1", hub=str(hub)).double(1) == 2


def test_a_local_kernels_stand_in_is_held_to_the_rule_too(tmp_path, kernel, keys, trusted, runtime_env, monkeypatch):
    # LOCAL_KERNELS replaces the hub's variant, not the rule: the local build, unsigned, is refused
    hub = tmp_path / "hub"
    publish(kernel, hub, "--sign", "--sign-key", str(keys["alice"]))
    monkeypatch.setenv("LOCAL_KERNELS", f"org/tiny={kernel.root}")
    message = refused(lambda: get_kernel("org/tiny@v1", hub=str(hub), require_signature=True))
    assert message.startswith(f"org/tiny from LOCAL_KERNELS ({kernel.root / 'build' / CHOSEN})") and "unsigned" in message
    assert "refused by the require-signature rule for org (set by require_signature=True)" in message
    assert get_kernel("org/tiny@v1", hub=str(hub)).double(1) == 2  # without the rule it stands in as before
    # a signed copy stands in under the rule (the variant the hub served, signature and all)
    new_process()
    monkeypatch.delenv("LOCAL_KERNELS")
    served = Path(get_kernel("org/tiny@v1", hub=str(hub), require_signature=True).__file__).parent
    local = shutil.copytree(served, tmp_path / "local" / CHOSEN)
    new_process()
    monkeypatch.setenv("LOCAL_KERNELS", f"org/tiny={local.parent}")
    module = get_kernel("org/tiny@v1", hub=str(hub), require_signature=True)
    assert Path(module.__file__).parent == local and module.double(3) == 6


def test_signed_by_an_unlisted_key_is_refused_naming_the_key(tmp_path, kernel, keys, trusted, runtime_env,
                                                             monkeypatch):
    hub = tmp_path / "hub"
    publish(kernel, hub, "--sign", "--sign-key", str(keys["mallory"]))
    monkeypatch.setenv("KBUILD_REQUIRE_SIGNATURE", "other,org")
    message = refused(lambda: get_kernel("org/tiny@v1", hub=str(hub)))
    assert f"signed by ED25519 key {fingerprint(keys['mallory'])}, which no trusted allowed_signers file lists" \
        in message
    assert "(set by KBUILD_REQUIRE_SIGNATURE=other,org)" in message
    assert cached(runtime_env) == []
    # the argument wins over the variable, both ways
    assert get_kernel("org/tiny@v1", hub=str(hub), require_signature=False).double(1) == 2
    monkeypatch.setenv("KBUILD_REQUIRE_SIGNATURE", "off")
    new_process()
    assert "require_signature=True" in refused(lambda: get_kernel("org/tiny@v1", hub=str(hub),
                                                                  require_signature=True))


def test_a_signature_over_other_digests_is_refused_naming_the_signer(tmp_path, kernel, keys, trusted, runtime_env):
    """A good signature by a trusted key, over a metadata.json with other digests (an older build's,
    say) beside this build's metadata.json."""
    hub = tmp_path / "hub"
    publish(kernel, hub)
    folder = tmp_path / "upload" / CHOSEN
    shutil.copytree(kernel.variant(CHOSEN), folder)
    meta = json.loads((folder / "metadata.json").read_text())
    meta["digest"]["files"]["__init__.py"] = "A" * 43 + "="  # the digests of other files
    other = tmp_path / "other-metadata.json"
    other.write_text(json.dumps(meta))
    subprocess.run(["ssh-keygen", "-Y", "sign", "-n", "kbuild", "-f", str(keys["alice"]), str(other)], check=True,
                   capture_output=True)
    shutil.copy(f"{other}.sig", folder / "metadata.json.sig")
    upload_as_another_builder(hub, "org/tiny", "v1", folder)
    message = refused(lambda: get_kernel("org/tiny@v1", hub=str(hub), require_signature=True))
    assert f"metadata.json.sig by alice@example.com (listed in {trusted}) is not a good signature of this " \
           "metadata.json" in message
    assert cached(runtime_env) == []


def test_a_signature_in_the_variant_folder_as_older_kbuild_published_it_is_still_checked(tmp_path, kernel, keys,
                                                                                         trusted, runtime_env):
    """Variants kbuild signed before the signature moved to signatures/<variant>/ hold it in
    build/<variant>/: one for another namespace, or garbage, is refused there; a good one loads."""
    hub = tmp_path / "hub"
    publish(kernel, hub)
    folder = tmp_path / "upload" / CHOSEN
    shutil.copytree(kernel.variant(CHOSEN), folder)
    subprocess.run(["ssh-keygen", "-Y", "sign", "-n", "git", "-f", str(keys["alice"]), str(folder / "metadata.json")],
                   check=True, capture_output=True)  # a git commit signature's namespace: never counts here
    upload_as_another_builder(hub, "org/tiny", "v1", folder)
    assert "is not a good signature of this metadata.json" in refused(
        lambda: get_kernel("org/tiny@v1", hub=str(hub), require_signature=True))
    (folder / "metadata.json.sig").write_text("not a signature\n")
    upload_as_another_builder(hub, "org/tiny", "v1", folder)
    assert "is not a good signature" in refused(lambda: get_kernel("org/tiny@v1", hub=str(hub), require_signature=True))
    assert cached(runtime_env) == []
    # without the rule a bad signature changes nothing
    assert get_kernel("org/tiny@v1", hub=str(hub)).double(1) == 2
    # a good one where kbuild before issue 44 published it, inside build/<variant>/: still read there
    (folder / "metadata.json.sig").unlink()
    subprocess.run(["ssh-keygen", "-Y", "sign", "-n", "kbuild", "-f", str(keys["alice"]), str(folder / "metadata.json")],
                   check=True, capture_output=True)  # writes metadata.json.sig beside it
    upload_as_another_builder(hub, "org/tiny", "v1", folder)
    new_process()
    assert get_kernel("org/tiny@v1", hub=str(hub), require_signature=True).double(5) == 10


def test_a_cached_copy_that_fails_the_rule_is_removed(tmp_path, kernel, trusted, runtime_env):
    hub = tmp_path / "hub"
    publish(kernel, hub)
    get_kernel("org/tiny@v1", hub=str(hub))  # cached without the rule
    assert cached(runtime_env) == [CHOSEN]
    new_process()
    message = refused(lambda: get_kernel("org/tiny@v1", hub=str(hub), require_signature=True))
    assert "unsigned" in message and "that cached copy was removed" in message
    assert cached(runtime_env) == []


def test_the_rule_and_the_signers_from_the_signatures_file(tmp_path, kernel, keys, runtime_env, capsys):
    hub = tmp_path / "hub"
    publish(kernel, hub, "--sign", "--sign-key", str(keys["alice"]))
    config = tmp_path / "config" / "kbuild"
    config.mkdir(parents=True)
    allowed_signers(config / "org.allowed_signers", **{"bob@example.com": keys["mallory"]})
    (config / "signatures").write_text("require org\nssh org org.allowed_signers   # relative to this file\n")
    message = refused(lambda: get_kernel("org/tiny@v1", hub=str(hub)))
    assert f"(set by {config / 'signatures'}:1)" in message and "which no trusted allowed_signers file lists" in message
    allowed_signers(config / "org.allowed_signers", **{"alice@example.com": keys["alice"]})
    new_process()
    assert get_kernel("org/tiny@v1", hub=str(hub)).double(3) == 6
    # a malformed line is one error naming the file and line
    (config / "signatures").write_text("require org\nssh org\n")
    with pytest.raises(ValueError, match=rf"^{config / 'signatures'}:2: expected `ssh ORG ALLOWED_SIGNERS_FILE`"):
        get_kernel("org/tiny@v1", hub=str(hub))
    capsys.readouterr()
    assert main(["verify", "org/tiny@v1", "--hub", str(hub)]) == 2  # and every command says the same, in one line
    assert capsys.readouterr().err == (f"kbuild: error: {config / 'signatures'}:2: expected `ssh ORG "
                                       "ALLOWED_SIGNERS_FILE`, got 'ssh org'\n")


def test_the_rule_over_kbuild_hub_serve(tmp_path, kernel, keys, trusted, runtime_env, monkeypatch, capsys):
    served, stop = start_server(tmp_path / "served")
    try:
        monkeypatch.setenv("HF_TOKEN", served.token)
        kernel.repo_id = "org/tiny"
        publish(kernel, served.url, "--sign", "--sign-key", str(keys["alice"]))
        monkeypatch.delenv("HF_TOKEN")
        monkeypatch.setenv("KBUILD_TRUSTED_ORGS", f"org@{served.url}")
        assert get_kernel("org/tiny@v1", hub=served.url, require_signature=True).double(4) == 8
        capsys.readouterr()
        assert main(["verify", "org/tiny@v1", "--hub", served.url, "--require"]) == 0
        out = capsys.readouterr().out
        assert out.count("signed by alice@example.com") == 2 and out.rstrip().endswith("ok")
        # republished unsigned: the branch's new commit is refused, and not cached
        before = sorted(p for p in runtime_env.glob("*/*/*/*/*") if p.is_dir())
        new_process()
        kernel.write(variant="unsigned").build()
        monkeypatch.setenv("HF_TOKEN", served.token)
        publish(kernel, served.url)
        monkeypatch.delenv("HF_TOKEN")
        assert "unsigned" in refused(lambda: get_kernel("org/tiny@v1", hub=served.url, require_signature=True))
        assert sorted(p for p in runtime_env.glob("*/*/*/*/*") if p.is_dir()) == before  # the signed commit's only
    finally:
        stop()


# -- kbuild verify ---------------------------------------------------------------------------------

def test_kbuild_verify_prints_who_signed_each_variant(tmp_path, kernel, keys, trusted, capsys, monkeypatch):
    hub = tmp_path / "hub"
    publish(kernel, hub, "--sign", "--sign-key", str(keys["alice"]), "--variant", "torch-cpu")
    publish(kernel, hub, "--variant", "torch-cuda")
    capsys.readouterr()
    assert main(["verify", "org/tiny@v1", "--hub", str(hub)]) == 0  # no rule: reported, not refused
    out = capsys.readouterr().out
    assert "no require-signature rule for org" in out
    assert f"torch-cpu   signed by alice@example.com (ED25519 key {fingerprint(keys['alice'])}, listed in {trusted})" \
        in out
    assert "torch-cuda  unsigned" in out
    assert main(["verify", "org/tiny@v1", "--hub", str(hub), "--require"]) == 1
    assert "FAILED: the require-signature rule for org (set by require_signature=True) refuses a variant" in \
        capsys.readouterr().out
    monkeypatch.setenv("KBUILD_REQUIRE_SIGNATURE", "*")
    assert main(["verify", "org/tiny@v1", "--hub", str(hub), "--variant", "torch-cpu", "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["required"] and record["ok"]
    assert [(v["variant"], v["trusted"]) for v in record["variants"]] == [("torch-cpu", True)]
    assert main(["verify", "org/tiny@v1", "--hub", str(hub), "--variant", "torch-nope"]) == 1
    err = capsys.readouterr().err
    assert "has no variant 'torch-nope'" in err and "Traceback" not in err


def test_kbuild_verify_names_an_untrusted_signer(tmp_path, kernel, keys, trusted, capsys):
    hub = tmp_path / "hub"
    publish(kernel, hub, "--sign", "--sign-key", str(keys["mallory"]))
    capsys.readouterr()
    assert main(["verify", "org/tiny@v1", "--hub", str(hub), "--require"]) == 1
    out = capsys.readouterr().out
    assert f"REFUSED (signed by ED25519 key {fingerprint(keys['mallory'])})" in out


# -- Hugging Face's loader -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def signed_and_served(tmp_path_factory):
    """org/tiny v1 published with --sign to a real `kbuild hub serve`, once for every loader below."""
    from huggingface_hub import HfApi

    kernel = Kernel(tmp_path_factory.mktemp("tiny")).write().build()
    key = keygen(tmp_path_factory.mktemp("keys"), "alice")
    served, stop = start_server(tmp_path_factory.mktemp("served"))
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("HF_TOKEN", served.token)
            kernel.publish(served.url, "--sign", "--sign-key", str(key))
        assert "signatures/torch-cpu/metadata.json.sig" in HfApi(endpoint=served.url).list_repo_files(
            "org/tiny", repo_type="kernel", revision="v1")
        yield served
    finally:
        stop()


# kernels 0.18+ check the digest on load and allow no file in build/<variant>/ but metadata.json,
# metadata.json.sigstore and bytecode (issue 44): the signature lives in signatures/<variant>/, which
# no release of kernels lists or downloads, so a signed variant loads as any other.
@pytest.mark.parametrize("env", ["kernels-0.16", "kernels-0.17", "kernels-0.18", "kernels-0.19"])
def test_hugging_faces_loader_loads_a_signed_kbuild_variant(env, tmp_path, signed_and_served):
    python = hf_envs.HOME / env / "bin" / "python"
    if not python.is_file():
        pytest.skip(f"no Hugging Face environment at {python.parent.parent} (ci/setup.sh makes it)")
    script = ("import json, kernels, pathlib\n"
              "k = kernels.get_kernel('org/tiny', version=1, backend='cpu', trust_remote_code=True)\n"
              "folder = pathlib.Path(k.__file__).parent\n"
              "print(json.dumps({'double': k.double(21), 'files': sorted(p.name for p in folder.iterdir())}))\n")
    done = subprocess.run([str(python), "-c", script], capture_output=True, text=True,
                          env=hf_envs.client_env(signed_and_served.url, tmp_path / "hf"), cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["double"] == 42 and "metadata.json.sig" not in seen["files"]


def test_an_allowed_signers_line_that_does_not_allow_the_signature_is_refused(tmp_path, keys):
    """git's allowed_signers options count: a key listed for git commits only (namespaces="git")
    signs no kernel, and the refusal says why."""
    from kbuild.signatures.ssh import verify

    meta = tmp_path / "metadata.json"
    meta.write_text('{"name": "tiny"}\n')
    subprocess.run(["ssh-keygen", "-Y", "sign", "-n", "kbuild", "-f", str(keys["alice"]), str(meta)], check=True,
                   capture_output=True)
    listing = tmp_path / "allowed_signers"
    key = " ".join(Path(f"{keys['alice']}.pub").read_text().split()[:2])
    listing.write_text(f'alice@example.com namespaces="git" {key}\n')
    with pytest.raises(SignatureRefused) as caught:
        verify(meta.read_bytes(), Path(f"{meta}.sig"), [listing], "v")
    assert str(caught.value) == (f"v: signed by alice@example.com (ED25519 key {fingerprint(keys['alice'])}), whose "
                                 f"line in {listing} does not allow this signature (its namespaces or validity)")
    listing.write_text(f'alice@example.com namespaces="git,kbuild" {key}\n')
    assert verify(meta.read_bytes(), Path(f"{meta}.sig"), [listing], "v").principal == "alice@example.com"


def test_without_ssh_keygen_the_rule_says_what_to_install(tmp_path, kernel, keys, trusted, runtime_env, monkeypatch):
    hub = tmp_path / "hub"
    publish(kernel, hub, "--sign", "--sign-key", str(keys["alice"]))
    bin_dir = tmp_path / "bin"  # git (the local hub's reader) and nothing of OpenSSH
    bin_dir.mkdir()
    (bin_dir / "git").symlink_to(shutil.which("git"))
    monkeypatch.setenv("PATH", str(bin_dir))
    message = refused(lambda: get_kernel("org/tiny@v1", hub=str(hub), require_signature=True))
    assert "checking its SSH signature needs ssh-keygen (OpenSSH), which is not on PATH; install openssh-client" \
        in message
    assert cached(runtime_env) == []
