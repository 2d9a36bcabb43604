"""`kbuild verify ORG/NAME@vN`: who signed each variant of a published kernel (docs/formats.md,
"Signatures"). Each variant is fetched through the loader's cache, so its files are checked
against its metadata.json's digest first, then its signatures against the organisation's trusted
signers; the require-signature rule decides the exit code, as it decides what get_kernel loads.
"""

from __future__ import annotations

from dataclasses import dataclass

from kbuild.errors import IntegrityError, KernelNotFound
from kbuild.hub_loader import Session, signature_rule
from kbuild.refs import parse_request
from kbuild.repo_layout import variant_folder
from kbuild.settings import from_environment
from kbuild.signatures.check import verdict
from kbuild.variants import detect_system


@dataclass(frozen=True)
class SignatureRow:
    variant: str
    signer: str | None  # None: unsigned
    refused: str | None  # why the variant or its signature is refused (a digest, a bad or untrusted signature)

    def as_json(self) -> dict:
        return {"variant": self.variant, "signed": self.signer is not None, "signer": self.signer,
                "trusted": self.signer is not None and self.refused is None, "refused": self.refused}


@dataclass(frozen=True)
class SignatureReport:
    repo_id: str
    revision: str
    commit: str
    hub: str
    required: bool
    rule: str  # "the require-signature rule for org (set by ...)" or "no require-signature rule for org"
    signers: str  # the organisation's trusted signers, described
    rows: tuple[SignatureRow, ...]

    @property
    def ok(self) -> bool:
        """Every variant's files match its digest, and under the rule every variant has a trusted signer."""
        digests_ok = all(r.refused is None or r.signer is not None for r in self.rows)
        return digests_ok and (not self.required or all(r.signer is not None and r.refused is None for r in self.rows))

    def as_json(self) -> dict:
        return {"repo": self.repo_id, "revision": self.revision, "commit": self.commit, "hub": self.hub,
                "required": self.required, "rule": self.rule, "trusted_signers": self.signers,
                "variants": [r.as_json() for r in self.rows], "ok": self.ok}


def verify_signatures(request: str, hub: str | None, variant: str | None = None,
                      require: bool | None = None) -> SignatureReport:
    """Every variant at `request` (or only `variant`), fetched and digest-checked, with who signed it."""
    ref = parse_request(request)
    settings = from_environment()
    session = Session(hub, settings, require_signature=False)  # report every variant; the rule sets the exit code
    found = session.resolve(ref, detect_system())
    names = sorted(c.name for c in found.trace)
    if variant is not None:
        if variant not in names:
            raise KernelNotFound(f"{ref} (commit {found.commit[:12]}) has no variant {variant!r}; it has: "
                                 f"{', '.join(names) or 'none'}")
        names = [variant]
    org = ref.repo_id.split("/")[0]
    rule, signers = signature_rule(settings, ref.repo_id, require)
    rows = []
    for name in names:
        where = f"{ref.repo_id}@{found.commit[:12]} {variant_folder(name)}"
        try:  # require_signature=False above: only a digest refuses here, never a signature
            folder = session.install(ref.repo_id, found.commit, name)
        except IntegrityError as e:  # its files do not match its digest: no signature can vouch for it
            rows.append(SignatureRow(name, None, str(e).splitlines()[0]))
            continue
        seen = verdict(folder, signers, where)
        rows.append(SignatureRow(name, seen.signer, seen.refused))
    described = rule.describe(org) if rule.required else f"no require-signature rule for {org}"
    return SignatureReport(ref.repo_id, ref.revision, found.commit, found.hub, rule.required, described,
                           signers.describe(), tuple(rows))
