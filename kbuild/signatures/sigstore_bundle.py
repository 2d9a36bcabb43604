"""Hugging Face's signatures: a sigstore bundle over a variant's metadata.json
(`metadata.json.sigstore`, docs/formats.md, "Signatures"), checked with sigstore-python against the
identities an organisation trusts, offline.

sigstore-python is optional (`pip install "kbuild[sigstore]"`); it is imported only when a bundle
must be checked. Offline: the verifier uses the production trusted root sigstore-python ships (or
the one its TUF cache already holds) and never refreshes it, and a bundle carries its own
transparency-log proof, so no request leaves this machine.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import SignatureRefused

if TYPE_CHECKING:
    from sigstore.verify import Verifier

BUNDLE = "metadata.json.sigstore"
EXTRA = 'pip install "kbuild[sigstore]"'
GITHUB_ISSUER = "https://token.actions.githubusercontent.com"


@dataclass(frozen=True)
class SigstoreIdentity:
    """Who an organisation trusts to sign with sigstore: a certificate identity (an e-mail or URI)
    and its OIDC issuer, or (`github_repo` set) Hugging Face's form: a GitHub workflow of that
    repository, `identity` being the workflow's URI (`https://github.com/o/r/.github/workflows/x.yaml@refs/heads/main`)."""

    identity: str
    issuer: str = GITHUB_ISSUER
    github_repo: str | None = None

    def describe(self) -> str:
        if self.github_repo:
            return f"GitHub workflow {self.identity} of {self.github_repo}"
        return f"{self.identity} (issuer {self.issuer})"


@dataclass(frozen=True)
class SigstoreSigner:
    identity: str  # the certificate's subject: an e-mail or a workflow URI
    issuer: str

    def describe(self) -> str:
        return f"{self.identity} (sigstore, issuer {self.issuer})"


def available() -> bool:
    try:
        import sigstore.verify  # noqa: F401
    except ImportError:
        return False
    return True


def verify(metadata: bytes, bundle_bytes: bytes, identities: list[SigstoreIdentity], where: str) -> SigstoreSigner:
    """The signer of the bundle over `metadata` when it is a good sigstore signature by one of
    `identities`; SignatureRefused (one line, naming the signer the bundle claims) otherwise."""
    try:
        from sigstore.errors import Error as SigstoreError
        from sigstore.models import Bundle
    except ImportError:
        raise SignatureRefused(f"{where}: checking its sigstore signature ({BUNDLE}) needs sigstore-python: "
                               f"{EXTRA}") from None
    try:
        bundle = Bundle.from_json(bundle_bytes)
    except (SigstoreError, ValueError) as e:
        raise SignatureRefused(f"{where}: {BUNDLE} is not a sigstore bundle ({_first_line(e)})") from None
    signer = signer_of(bundle)
    if not identities:
        raise SignatureRefused(f"{where}: signed by {signer.describe()}, and no sigstore identity is trusted "
                               "for this organisation")
    rule = _policy(identities)
    try:
        _verifier().verify_artifact(metadata, bundle, rule)
    except SigstoreError as e:
        try:
            rule.verify(bundle.signing_certificate)
        except SigstoreError:  # the identity is not one the organisation trusts
            listed = "; ".join(i.describe() for i in identities)
            raise SignatureRefused(f"{where}: signed by {signer.describe()}, which is not a trusted sigstore "
                                   f"identity (trusted: {listed})") from None
        raise SignatureRefused(f"{where}: {BUNDLE} by {signer.describe()} is not a good signature of this "
                               f"metadata.json (made over other content): {_first_line(e)}") from None
    return signer


def claimed_signer(bundle_bytes: bytes) -> SigstoreSigner | None:
    """Who the bundle's certificate names, unchecked (for a report of a refused bundle); None when
    sigstore-python is missing or the bundle cannot be read."""
    try:
        from sigstore.models import Bundle

        return signer_of(Bundle.from_json(bundle_bytes))
    except Exception:  # noqa: BLE001 - any failure only means there is no name to report
        return None


def signer_of(bundle) -> SigstoreSigner:
    """The identity and issuer the bundle's signing certificate names (not checked here)."""
    from cryptography import x509
    from cryptography.x509.oid import ObjectIdentifier

    cert = bundle.signing_certificate
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        names = san.get_values_for_type(x509.RFC822Name) + san.get_values_for_type(x509.UniformResourceIdentifier)
    except x509.ExtensionNotFound:
        names = []
    issuer = "unknown"
    for oid in ("1.3.6.1.4.1.57264.1.8", "1.3.6.1.4.1.57264.1.1"):  # Fulcio's issuer (v2, then v1)
        try:
            raw = cert.extensions.get_extension_for_oid(ObjectIdentifier(oid)).value.value
        except x509.ExtensionNotFound:
            continue
        issuer = _der_text(raw) if oid.endswith(".8") else raw.decode(errors="replace")
        break
    return SigstoreSigner(names[0] if names else "an unnamed certificate", issuer)


def _policy(identities: list[SigstoreIdentity]):
    from sigstore.verify import policy

    rules: list[policy.VerificationPolicy] = []
    for i in identities:
        if i.github_repo:  # Hugging Face's GitHubWorkflowPolicy: this repository's workflow, on GitHub's issuer
            rules.append(policy.AllOf([policy.OIDCIssuer(GITHUB_ISSUER), policy.OIDCIssuerV2(GITHUB_ISSUER),
                                       policy.OIDCSourceRepositoryURI(f"https://github.com/{i.github_repo}"),
                                       policy.OIDCBuildSignerURI(i.identity)]))
        else:
            rules.append(policy.Identity(identity=i.identity, issuer=i.issuer))
    return policy.AnyOf(rules)


_VERIFIER: list[Verifier] = []


def _verifier():
    """One per process: the production trusted root, never refreshed over the network."""
    if not _VERIFIER:
        import logging  # noqa: PLC0415 - cost: the loader imports logging (20 ms) only with sigstore

        from sigstore.verify import Verifier

        tuf = logging.getLogger("sigstore._internal.tuf")  # its "offline mode" warning is what was asked for
        level, tuf.level = tuf.level, logging.ERROR
        try:
            _VERIFIER.append(Verifier.production(offline=True))
        finally:
            tuf.setLevel(level)
    return _VERIFIER[0]


def _der_text(raw: bytes) -> str:
    """A DER UTF8String's text (Fulcio's v2 extensions are DER-encoded)."""
    if len(raw) >= 2 and raw[0] == 0x0C:
        length, start = raw[1], 2
        if length & 0x80:
            count = length & 0x7F
            length, start = int.from_bytes(raw[2:2 + count], "big"), 2 + count
        return raw[start:start + length].decode(errors="replace")
    return raw.decode(errors="replace")


def _first_line(e: Exception) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__
