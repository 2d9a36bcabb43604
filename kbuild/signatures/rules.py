"""The signature settings: whom each organisation trusts to sign its variants, and which
organisations' variants must be signed (docs/formats.md, "Signatures"). Read with the runtime's
other settings (kbuild/settings.py); every rule keeps where it was set, for the refusals.

| variable | meaning |
|---|---|
| `KBUILD_REQUIRE_SIGNATURE` | organisations whose variants get_kernel loads only when a trusted signer signed them, comma-separated; `*` every organisation; `off` none (the signatures file's `require` lines are then ignored) |
| `KBUILD_ALLOWED_SIGNERS` | `org=/path/allowed_signers` entries, comma-separated: the SSH signers an organisation trusts, in place of the signatures file's `ssh` lines for it |
| `KBUILD_SIGNATURES` | the signatures file (default `$XDG_CONFIG_HOME/kbuild/signatures`, else `~/.config/kbuild/signatures`) |

The signatures file holds one rule a line; `#` starts a comment; a relative path is relative to
the file's folder:

    require ORG                      # or `require *`
    ssh ORG ALLOWED_SIGNERS_FILE     # git's allowed_signers format: `principal key-type key`
    sigstore ORG IDENTITY ISSUER     # a sigstore certificate identity (e-mail or URI) and its OIDC issuer
    sigstore-github ORG OWNER/REPO WORKFLOW_URI   # Hugging Face's form: a GitHub workflow of that repository
    sign-key KEY_FILE                # the SSH key `kbuild publish --sign` signs with (read by the builder)

Precedence, as for every setting: get_kernel's `require_signature=` argument, then the variable,
then the file; signers per organisation: `KBUILD_ALLOWED_SIGNERS`'s entry for it, then the file
(and for kernels-community's sigstore signers, then Hugging Face's build workflows).
"""  # noqa: E501 - a markdown table row is one line, however long

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InvalidSetting
from .sigstore_bundle import SigstoreIdentity

ALL = "*"
OFF = "off"
# Who signs kernels-community's builds: Hugging Face's build workflows (its `kernels verify-signature`
# trusts the same), the default until the signatures file names sigstore signers for that org.
_HF_WORKFLOWS = "https://github.com/huggingface/kernels-community/.github/workflows/"
BUILTIN_SIGSTORE = {"kernels-community": tuple(
    (SigstoreIdentity(f"{_HF_WORKFLOWS}{workflow}@refs/heads/main", github_repo="huggingface/kernels-community"),
     "built in: Hugging Face's kernels-community workflows")
    for workflow in ("build.yaml", "build-mac.yaml", "build-windows.yaml", "sign-old-builds.yaml"))}


@dataclass(frozen=True)
class Requirement:
    required: bool
    origin: str  # "require_signature=True", "KBUILD_REQUIRE_SIGNATURE=acme", "<file>:3", "default"

    def describe(self, org: str) -> str:
        return f"the require-signature rule for {org} (set by {self.origin})"


@dataclass(frozen=True)
class OrgSigners:
    """Whom one organisation trusts to sign: allowed_signers files and sigstore identities, each with where it
    was set."""

    org: str
    ssh: tuple[tuple[Path, str], ...] = ()
    sigstore: tuple[tuple[SigstoreIdentity, str], ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.ssh or self.sigstore)

    def describe(self) -> str:
        listed = [f"{path} ({origin})" for path, origin in self.ssh] + \
                 [f"{who.describe()} ({origin})" for who, origin in self.sigstore]
        return ", ".join(listed) or "none"


@dataclass(frozen=True)
class SignatureSettings:
    require: tuple[tuple[str, str], ...] = ()  # (org or *, where it was set)
    ssh: dict[str, tuple[tuple[Path, str], ...]] = field(default_factory=dict)
    sigstore: dict[str, tuple[tuple[SigstoreIdentity, str], ...]] = field(default_factory=dict)
    sign_key: tuple[Path, str] | None = None  # (key file, where it was set)

    def requirement(self, org: str, argument: bool | None = None) -> Requirement:
        """Whether `org`'s variants must be signed: the argument, else the variable's or file's rule."""
        if argument is not None:
            return Requirement(bool(argument), f"require_signature={bool(argument)}")
        for name, origin in self.require:
            if name in (org, ALL):
                return Requirement(True, origin)
        return Requirement(False, "default")

    def signers(self, org: str) -> OrgSigners:
        return OrgSigners(org, self.ssh.get(org, ()), self.sigstore.get(org, ()))


def from_environment(env) -> SignatureSettings:
    path = signatures_file(env)
    from_file = _read_file(path) if path.is_file() else SignatureSettings()
    require = from_file.require
    value = env.get("KBUILD_REQUIRE_SIGNATURE", "").strip()
    if value:  # the variable wins over the file
        require = () if value == OFF else tuple((org, f"KBUILD_REQUIRE_SIGNATURE={value}") for org in _orgs(value))
    ssh = dict(from_file.ssh)
    for org, files in _allowed_signers(env.get("KBUILD_ALLOWED_SIGNERS", "")).items():
        ssh[org] = files
    return SignatureSettings(require, ssh, {**BUILTIN_SIGSTORE, **from_file.sigstore}, from_file.sign_key)


def signatures_file(env=None) -> Path:
    """`KBUILD_SIGNATURES`, else `$XDG_CONFIG_HOME/kbuild/signatures` (beside trusted-orgs)."""
    env = os.environ if env is None else env
    if env.get("KBUILD_SIGNATURES"):
        return Path(env["KBUILD_SIGNATURES"]).expanduser()
    base = Path(env["XDG_CONFIG_HOME"]) if env.get("XDG_CONFIG_HOME") else Path.home() / ".config"
    return base / "kbuild" / "signatures"


def _orgs(value: str) -> list[str]:
    return [o.strip() for o in value.split(",") if o.strip()]


def _allowed_signers(value: str) -> dict[str, tuple[tuple[Path, str], ...]]:
    found: dict[str, list[tuple[Path, str]]] = {}
    for entry in filter(None, (e.strip() for e in value.split(","))):
        org, sep, path = entry.partition("=")
        if not sep or not org.strip() or "/" in org or not path.strip():
            raise InvalidSetting(f"KBUILD_ALLOWED_SIGNERS: bad entry {entry!r} (expected org=/path/to/allowed_signers, "
                                 "entries separated by ',')")
        found.setdefault(org.strip(), []).append((Path(path.strip()).expanduser(), "KBUILD_ALLOWED_SIGNERS"))
    return {org: tuple(files) for org, files in found.items()}


_FORMS = {"require": "require ORG (or *)", "ssh": "ssh ORG ALLOWED_SIGNERS_FILE",
          "sigstore": "sigstore ORG IDENTITY ISSUER", "sigstore-github": "sigstore-github ORG OWNER/REPO WORKFLOW_URI",
          "sign-key": "sign-key KEY_FILE"}
_WORDS = {"require": 2, "ssh": 3, "sigstore": 4, "sigstore-github": 4, "sign-key": 2}


def _read_file(path: Path) -> SignatureSettings:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise InvalidSetting(f"{path}: cannot be read as the signatures file ({e})") from None
    require: list[tuple[str, str]] = []
    ssh: dict[str, list[tuple[Path, str]]] = {}
    sigstore: dict[str, list[tuple[SigstoreIdentity, str]]] = {}
    sign_key: tuple[Path, str] | None = None
    for number, line in enumerate(text.splitlines(), 1):
        words = line.partition("#")[0].split()
        if not words:
            continue
        where = f"{path}:{number}"
        kind = words[0]
        if kind not in _FORMS:
            raise InvalidSetting(f"{where}: unknown rule {kind!r}; expected one of: {'; '.join(_FORMS.values())}")
        if len(words) != _WORDS[kind]:
            raise InvalidSetting(f"{where}: expected `{_FORMS[kind]}`, got {line.strip()!r}")
        if kind == "require":
            require.append((words[1], where))
        elif kind == "ssh":
            ssh.setdefault(words[1], []).append((_relative(path, words[2]), where))
        elif kind == "sigstore":
            sigstore.setdefault(words[1], []).append((SigstoreIdentity(words[2], words[3]), where))
        elif kind == "sigstore-github":
            if words[2].count("/") != 1 or not words[3].startswith(f"https://github.com/{words[2]}/"):
                raise InvalidSetting(f"{where}: expected `{_FORMS[kind]}` with a workflow URI of that repository "
                                     f"(https://github.com/{words[2]}/.github/workflows/<file>@<ref>), "
                                     f"got {line.strip()!r}")
            sigstore.setdefault(words[1], []).append((SigstoreIdentity(words[3], github_repo=words[2]), where))
        else:
            sign_key = (_relative(path, words[1]), where)
    return SignatureSettings(tuple(require), {o: tuple(v) for o, v in ssh.items()},
                             {o: tuple(v) for o, v in sigstore.items()}, sign_key)


def _relative(config: Path, value: str) -> Path:
    path = Path(value).expanduser()
    return path if path.is_absolute() else config.parent / path
