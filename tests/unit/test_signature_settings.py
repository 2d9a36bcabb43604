"""The signature settings (kbuild/signatures/rules.py): the require-signature rule and each organisation's
trusted signers through the cascade (argument, variable, signatures file, default), each keeping
where it was set; a malformed entry is one line naming the file and line or the variable. And
`kbuild publish --sign`'s key through the builder's cascade."""

from __future__ import annotations

from pathlib import Path

import pytest

from builder.config.environment import from_environment as builder_settings
from kbuild.errors import InvalidSetting
from kbuild.signatures.rules import BUILTIN_SIGSTORE, from_environment
from kbuild.signatures.sigstore_bundle import SigstoreIdentity
from kbuild_common.errors import UsageError

WORKFLOW = "https://github.com/acme/kernels/.github/workflows/build.yaml@refs/heads/main"


def settings_file(tmp_path: Path, text: str) -> dict:
    (tmp_path / "kbuild").mkdir(exist_ok=True)
    (tmp_path / "kbuild" / "signatures").write_text(text)
    return {"XDG_CONFIG_HOME": str(tmp_path)}


def test_the_rule_comes_from_the_argument_the_variable_the_file_or_nowhere(tmp_path):
    env = settings_file(tmp_path, "# orgs that must sign\nrequire acme\n")
    where = f"{tmp_path / 'kbuild' / 'signatures'}:2"
    rule = from_environment(env).requirement("acme")
    assert rule.required and rule.origin == where
    assert not from_environment(env).requirement("other").required
    assert from_environment(env).requirement("other").origin == "default"
    assert from_environment(env).requirement("acme", False).origin == "require_signature=False"
    assert not from_environment(env).requirement("acme", False).required
    assert from_environment(env).requirement("other", True).required

    both = {**env, "KBUILD_REQUIRE_SIGNATURE": "beta, gamma"}
    assert not from_environment(both).requirement("acme").required  # the variable replaces the file's rule
    assert from_environment(both).requirement("gamma").origin == "KBUILD_REQUIRE_SIGNATURE=beta, gamma"
    assert not from_environment({**env, "KBUILD_REQUIRE_SIGNATURE": "off"}).requirement("acme").required
    assert from_environment({"KBUILD_REQUIRE_SIGNATURE": "*"}).requirement("anyone").required
    assert "(set by KBUILD_REQUIRE_SIGNATURE=*)" in \
        from_environment({"KBUILD_REQUIRE_SIGNATURE": "*"}).requirement("x").describe("x")


def test_signers_per_organisation_from_the_file_and_the_variable(tmp_path):
    env = settings_file(tmp_path, f"ssh acme acme.allowed_signers\nssh beta /etc/beta.allowed_signers\n"
                                  f"sigstore acme ci@acme.example https://accounts.google.com\n"
                                  f"sigstore-github acme acme/kernels {WORKFLOW}\n")
    file = tmp_path / "kbuild" / "signatures"
    acme = from_environment(env).signers("acme")
    assert acme.ssh == ((tmp_path / "kbuild" / "acme.allowed_signers", f"{file}:1"),)  # relative to the file
    assert acme.sigstore == ((SigstoreIdentity("ci@acme.example", "https://accounts.google.com"), f"{file}:3"),
                             (SigstoreIdentity(WORKFLOW, github_repo="acme/kernels"), f"{file}:4"))
    # the variable's entry replaces the file's for that organisation only
    env["KBUILD_ALLOWED_SIGNERS"] = "acme=/keys/a, acme=/keys/b"
    assert from_environment(env).signers("acme").ssh == ((Path("/keys/a"), "KBUILD_ALLOWED_SIGNERS"),
                                                          (Path("/keys/b"), "KBUILD_ALLOWED_SIGNERS"))
    assert from_environment(env).signers("beta").ssh == ((Path("/etc/beta.allowed_signers"), f"{file}:2"),)
    assert from_environment(env).signers("nobody").empty
    assert from_environment(env).signers("nobody").describe() == "none"


def test_kernels_community_trusts_hugging_faces_workflows_until_the_file_says_otherwise(tmp_path):
    assert from_environment({"XDG_CONFIG_HOME": str(tmp_path)}).signers("kernels-community").sigstore == \
        BUILTIN_SIGSTORE["kernels-community"]
    assert all(i.github_repo == "huggingface/kernels-community" for i, _ in BUILTIN_SIGSTORE["kernels-community"])
    env = settings_file(tmp_path, f"sigstore-github kernels-community acme/kernels {WORKFLOW}\n")
    (only,) = from_environment(env).signers("kernels-community").sigstore
    assert only[0].github_repo == "acme/kernels"


@pytest.mark.parametrize("line, expected", [
    ("trust acme key", "unknown rule 'trust'; expected one of: require ORG (or *); ssh ORG ALLOWED_SIGNERS_FILE"),
    ("ssh acme", "expected `ssh ORG ALLOWED_SIGNERS_FILE`, got 'ssh acme'"),
    ("require", "expected `require ORG (or *)`, got 'require'"),
    ("sigstore acme ci@acme.example", "expected `sigstore ORG IDENTITY ISSUER`"),
    ("sigstore-github acme acme/kernels https://github.com/other/x/.github/workflows/b.yaml@refs/heads/main",
     "with a workflow URI of that repository (https://github.com/acme/kernels/.github/workflows/<file>@<ref>)"),
])
def test_a_malformed_line_is_one_error_naming_the_file_and_line(tmp_path, line, expected):
    env = settings_file(tmp_path, f"require acme\n{line}\n")
    with pytest.raises(InvalidSetting) as caught:
        from_environment(env)
    message = str(caught.value)
    assert message.startswith(f"{tmp_path / 'kbuild' / 'signatures'}:2: ") and expected in message
    assert "\n" not in message


@pytest.mark.parametrize("value", ["acme", "=/x", "acme=", "a/b=/x"])
def test_a_malformed_allowed_signers_entry_names_the_variable(value):
    with pytest.raises(InvalidSetting, match=r"^KBUILD_ALLOWED_SIGNERS: bad entry .* \(expected org=/path/to/"
                                             r"allowed_signers, entries separated by ','\)$"):
        from_environment({"KBUILD_ALLOWED_SIGNERS": value})


def test_the_signing_key_cascade(tmp_path):
    keys = {name: tmp_path / name for name in ("flag", "env", "file")}
    for key in keys.values():
        key.write_text("a key\n")
    env = {**settings_file(tmp_path, f"sign-key {keys['file']}\n"), "KBUILD_SIGNING_KEY": str(keys["env"])}
    flag = builder_settings(env).signing_key_setting(str(keys["flag"]))
    assert (flag.value, flag.origin) == (keys["flag"], "--sign-key")
    assert builder_settings(env).signing_key_setting(None).value == keys["env"]
    assert builder_settings(env).signing_key_setting(None).origin == "KBUILD_SIGNING_KEY"
    del env["KBUILD_SIGNING_KEY"]
    found = builder_settings(env).signing_key_setting(None)
    assert found.value == keys["file"] and found.origin == f"{tmp_path / 'kbuild' / 'signatures'}:1"
    env = settings_file(tmp_path, "")
    with pytest.raises(UsageError, match=r"^--sign: no signing key: pass --sign-key KEY_FILE, set KBUILD_SIGNING_KEY, "
                                         rf"or add a line `sign-key KEY_FILE` to {tmp_path / 'kbuild' / 'signatures'}$"):
        builder_settings(env).signing_key_setting(None)
    with pytest.raises(UsageError, match=r"^KBUILD_SIGNING_KEY: .*missing is not a file"):
        builder_settings({**env, "KBUILD_SIGNING_KEY": str(tmp_path / "missing")}).signing_key_setting(None)
