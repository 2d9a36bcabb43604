"""Hugging Face's signature format: a sigstore bundle over metadata.json (`metadata.json.sigstore`),
checked with sigstore-python against the identities an organisation trusts, offline.

The bundle is a real one from sigstore's production instance over a real artifact (tests/data/sigstore/
README.md): rfc8785 0.1.2's wheel, signed by its GitHub release workflow. Its artifact is no
metadata.json, so a variant carrying it is refused as a signature over other content, while the
bundle verifies over its own artifact: the two halves of the check, each with real data.
"""

from __future__ import annotations

import shutil
import socket
import sys
from pathlib import Path

import pytest
import torch

from builder.commands.main import main
from kbuild import get_kernel
from kbuild.errors import SignatureRefused
from kbuild.signatures import sigstore_bundle as sigstore_signature
from kbuild.signatures.sigstore_bundle import SigstoreIdentity, verify
from runtime_hubs import Kernel, runtime_env, torch_probes, upload_as_another_builder

__all__ = ["runtime_env", "torch_probes"]  # fixtures, used by name

DATA = Path(__file__).resolve().parents[1] / "data" / "sigstore"
ARTIFACT = (DATA / "bundle_v3_github.whl").read_bytes()
BUNDLE = (DATA / "bundle_v3_github.whl.sigstore").read_bytes()
REPO = "trailofbits/rfc8785.py"
WORKFLOW = f"https://github.com/{REPO}/.github/workflows/release.yml@refs/tags/v0.1.2"
CHOSEN = "torch-cuda" if torch.cuda.is_available() else "torch-cpu"


@pytest.fixture
def offline(tmp_path, monkeypatch):
    """No connection can be opened, and sigstore's TUF cache starts empty (a fresh home): the
    verifier must work from the trusted root sigstore-python ships."""
    for name in ("HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME"):
        monkeypatch.setenv(name, str(tmp_path / "home" / name.lower()))
    monkeypatch.setattr(sigstore_signature, "_VERIFIER", [])

    def refuse(*args, **kwargs):
        raise AssertionError(f"a network connection was attempted: {args}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def test_a_real_bundle_verifies_offline_in_hugging_faces_workflow_form(offline):
    signer = verify(ARTIFACT, BUNDLE, [SigstoreIdentity(WORKFLOW, github_repo=REPO)], "rfc8785.whl")
    assert signer.identity == WORKFLOW and signer.issuer == "https://token.actions.githubusercontent.com"


def test_a_real_bundle_verifies_offline_as_an_identity_and_issuer(offline):
    signer = verify(ARTIFACT, BUNDLE, [SigstoreIdentity("a@example.com", "https://accounts.google.com"),
                                       SigstoreIdentity(WORKFLOW, "https://token.actions.githubusercontent.com")], "x")
    assert signer.identity == WORKFLOW


@pytest.mark.parametrize("identities", [
    [SigstoreIdentity(WORKFLOW, github_repo="trailofbits/other")],  # the right workflow URI, another repository
    [SigstoreIdentity(WORKFLOW.replace("v0.1.2", "v9"), github_repo=REPO)],  # another ref
    [SigstoreIdentity(WORKFLOW, "https://accounts.google.com")],  # another issuer
    [],
])
def test_a_signer_the_organisation_does_not_list_is_refused_by_name(offline, identities):
    with pytest.raises(SignatureRefused) as caught:
        verify(ARTIFACT, BUNDLE, identities, "org/k@abc build/v")
    message = str(caught.value)
    assert message.startswith(f"org/k@abc build/v: signed by {WORKFLOW} (sigstore, issuer "
                              "https://token.actions.githubusercontent.com)") and "\n" not in message


def test_a_bundle_over_other_content_is_refused(offline):
    with pytest.raises(SignatureRefused, match="is not a good signature of this metadata.json \\(made over other "
                                               "content\\)"):
        verify(ARTIFACT + b"\n", BUNDLE, [SigstoreIdentity(WORKFLOW, github_repo=REPO)], "x")
    with pytest.raises(SignatureRefused, match="metadata.json.sigstore is not a sigstore bundle"):
        verify(ARTIFACT, b'{"mediaType": "nonsense"}', [SigstoreIdentity(WORKFLOW, github_repo=REPO)], "x")


def test_without_sigstore_the_error_names_the_extra(monkeypatch):
    for name in ("sigstore", "sigstore.errors", "sigstore.models"):
        monkeypatch.setitem(sys.modules, name, None)  # what `import` finds when the package is not installed
    with pytest.raises(SignatureRefused) as caught:
        verify(ARTIFACT, BUNDLE, [], "org/k@abc build/v")
    assert str(caught.value) == ("org/k@abc build/v: checking its sigstore signature (metadata.json.sigstore) needs "
                                 'sigstore-python: pip install "kbuild[sigstore]"')


# -- through the loader ----------------------------------------------------------------------------

@pytest.fixture
def hub_with_bundle(tmp_path) -> Path:
    """org/tiny v1 whose chosen variant carries the real bundle as its metadata.json.sigstore."""
    kernel = Kernel(tmp_path / "tiny").write().build()
    hub = tmp_path / "hub"
    kernel.publish(hub)
    folder = tmp_path / "upload" / CHOSEN
    shutil.copytree(kernel.variant(CHOSEN), folder)
    (folder / "metadata.json.sigstore").write_bytes(BUNDLE)
    upload_as_another_builder(hub, "org/tiny", "v1", folder)
    return hub


@pytest.mark.usefixtures("runtime_env")
def test_the_loader_checks_a_sigstore_bundle_under_the_rule(tmp_path, hub_with_bundle, runtime_env, offline,
                                                            monkeypatch, capsys):
    config = tmp_path / "config" / "kbuild"
    config.mkdir(parents=True)
    (config / "signatures").write_text(f"require org\nsigstore-github org {REPO} {WORKFLOW}\n")
    with pytest.raises(SignatureRefused) as caught:
        get_kernel("org/tiny@v1", hub=str(hub_with_bundle))
    message = str(caught.value)
    assert f"metadata.json.sigstore by {WORKFLOW} (sigstore, issuer https://token.actions.githubusercontent.com) is " \
           "not a good signature of this metadata.json (made over other content)" in message
    assert f"refused by the require-signature rule for org (set by {config / 'signatures'}:1)" in message
    assert not [p for p in runtime_env.glob("*/*/*/*/*") if p.is_dir()]  # nothing refused is cached

    (config / "signatures").write_text("require org\nsigstore org someone@example.com https://accounts.google.com\n")
    with pytest.raises(SignatureRefused, match=f"signed by {WORKFLOW} .*, which is not a trusted sigstore identity"):
        get_kernel("org/tiny@v1", hub=str(hub_with_bundle))

    assert main(["verify", "org/tiny@v1", "--hub", str(hub_with_bundle), "--variant", CHOSEN]) == 1
    assert f"REFUSED (signed by {WORKFLOW} (sigstore, issuer https://token.actions.githubusercontent.com)): " \
           "org/tiny@" in capsys.readouterr().out
    (config / "signatures").write_text("")
    assert get_kernel("org/tiny@v1", hub=str(hub_with_bundle)).double(1) == 2  # without the rule nothing changes
