"""Who signed a variant, and the require-signature rule (docs/formats.md, "Signatures").

A variant is signed when its folder holds a detached signature over its metadata.json: kbuild's
SSH signature (`metadata.json.sig`, kbuild/signatures/ssh.py; published outside the variant folder,
in `signatures/<variant>/`, and fetched back beside metadata.json: kbuild/repo_layout.py) or Hugging
Face's sigstore bundle (`metadata.json.sigstore`, kbuild/signatures/sigstore_bundle.py).
metadata.json records every other file's digest, which the loader checks anyway, so a good
signature over it vouches for the whole variant.

Under the rule (kbuild/signatures/rules.py) a variant loads only when one of its signatures is good and by a
signer its organisation trusts; the check runs on the fetched folder before the cache keeps it,
and on a cached copy before it is used (a copy that fails is removed: kbuild/cache.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..digest import METADATA
from ..errors import SignatureRefused
from . import sigstore_bundle, ssh
from .rules import OrgSigners, Requirement


@dataclass(frozen=True)
class Verdict:
    """What `kbuild verify` prints for a variant: who signed it (None: unsigned), or why its
    signature is refused."""

    signer: str | None
    refused: str | None = None

    @property
    def trusted(self) -> bool:
        return self.signer is not None and self.refused is None


def signatures(folder: Path) -> list[str]:
    """The detached signatures the variant folder holds, kbuild's first."""
    return [name for name in (ssh.SIGNATURE, sigstore_bundle.BUNDLE) if (Path(folder) / name).is_file()]


def check(folder: Path, signers: OrgSigners, where: str) -> str:
    """The trusted signer of the variant at `folder` (described); SignatureRefused naming why not:
    unsigned, or every signature it holds is bad or by a signer `signers` does not list."""
    folder = Path(folder)
    found = signatures(folder)
    if not found:
        raise SignatureRefused(f"{where}: unsigned (no {ssh.SIGNATURE} or {sigstore_bundle.BUNDLE} "
                               "beside its metadata.json)")
    for path, origin in signers.ssh:
        if not path.is_file():
            raise SignatureRefused(f"{where}: the allowed_signers file {path} (set by {origin}) is not a readable file")
    metadata = (folder / METADATA).read_bytes()
    refusals = []
    for name in found:
        try:
            if name == ssh.SIGNATURE:
                return ssh.verify(metadata, folder / name, [p for p, _ in signers.ssh], where).describe()
            return sigstore_bundle.verify(metadata, (folder / name).read_bytes(), [i for i, _ in signers.sigstore],
                                             where).describe()
        except SignatureRefused as e:
            refusals.append(str(e))
    raise SignatureRefused(refusals[0] if len(refusals) == 1 else "; ".join(refusals))


def verdict(folder: Path, signers: OrgSigners, where: str) -> Verdict:
    """Who signed the variant, for a report: never raises for a bad signature. A good SSH signature
    by a key the organisation does not list still names the key."""
    folder = Path(folder)
    if not signatures(folder):
        return Verdict(None)
    try:
        return Verdict(check(folder, signers, where))
    except SignatureRefused as e:
        signer = None
        if (folder / ssh.SIGNATURE).is_file() and ssh.ssh_keygen_found():
            signer = ssh.key_of(folder / ssh.SIGNATURE, (folder / METADATA).read_bytes())
        if signer is None and (folder / sigstore_bundle.BUNDLE).is_file():
            claimed = sigstore_bundle.claimed_signer((folder / sigstore_bundle.BUNDLE).read_bytes())
            signer = claimed.describe() if claimed else None
        return Verdict(signer or "an unreadable signature", str(e))


def requirement_check(signers: OrgSigners, rule: Requirement, where: str):
    """The loader's check of a variant folder under `rule` (an `Expect` for kbuild/cache.py):
    SignatureRefused, in one line naming the signer, the rule and where it was set."""
    def expect(folder: Path) -> None:
        try:
            check(folder, signers, where)
        except SignatureRefused as e:
            raise SignatureRefused(f"{e}; refused by {rule.describe(signers.org)}; trusted signers for "
                                   f"{signers.org}: {signers.describe()}") from None
    return expect
