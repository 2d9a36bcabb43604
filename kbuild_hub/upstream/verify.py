"""What must hold before anything fetched from the upstream is kept: each file against the
upstream's own listing (git blob id, or LFS sha256), and a kernel variant as a whole against its
metadata.json digest and, where the organisation has a signature rule, its signature
(docs/upstream.md, "What is verified").
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from kbuild.digest import METADATA, verify_tree
from kbuild.errors import IntegrityError, KernelError
from kbuild.signatures import check as signature_check
from kbuild.signatures.rules import SignatureSettings
from kbuild_hub.errors import HubError


class Refused(HubError):
    """Fetched content that failed verification: never kept, never served."""

    http_status = 403
    error_code = "UpstreamContentRefused"


class ContentHash:
    """The hash an upstream listing names a file by: LFS files by sha256, the others by git blob id."""

    def __init__(self, entry: dict):
        lfs = entry.get("lfs") if isinstance(entry.get("lfs"), dict) else None
        self.size = int(entry.get("size") or 0)
        if lfs and isinstance(lfs.get("oid"), str):
            self.expected, self._h = lfs["oid"].lower(), hashlib.sha256()
            self.size = int(lfs.get("size") or self.size)
        else:
            self.expected, self._h = str(entry.get("oid", "")).lower(), hashlib.sha1()
            self._h.update(b"blob %d\0" % self.size)
        self.received = 0

    def update(self, chunk: bytes) -> None:
        self._h.update(chunk)
        self.received += len(chunk)

    def check(self, what: str) -> None:
        if self.received != self.size:
            raise Refused(f"{what}: {self.received} bytes received, the upstream's listing says {self.size}")
        if self._h.hexdigest() != self.expected:
            raise Refused(f"{what}: content does not match the upstream's listing ({self.expected[:12]})")


def verify_variant(folder: Path, where: str, org: str, signatures: SignatureSettings) -> str:
    """Check a fetched variant folder; returns how it was verified (for the record and the pages).
    Refused naming `where` and the first file that fails."""
    try:
        metadata = json.loads((folder / METADATA).read_bytes())
    except (OSError, ValueError) as e:
        raise Refused(f"{where}: metadata.json is missing or not JSON ({e})") from None
    digest = metadata.get("digest") if isinstance(metadata, dict) else None
    how = "no digest in metadata.json"
    if digest is not None:
        _check_digest(folder, digest, where)
        how = f"{digest.get('algorithm')} digest of {len(digest.get('files') or {})} files"
    how += _check_signature(folder, where, org, signatures)
    return how


def _check_digest(folder: Path, digest, where: str) -> None:
    algorithm = digest.get("algorithm") if isinstance(digest, dict) else None
    files = digest.get("files") if isinstance(digest, dict) else None
    if algorithm not in ("sha256", "sha512") or not isinstance(files, dict):
        raise Refused(f"{where}: metadata.json's digest is not {{algorithm: sha256|sha512, files: {{…}}}}")
    try:  # the loader's own check, with the loader's rule for which files count
        verify_tree(folder, files, algorithm, where)
    except IntegrityError as e:
        raise Refused(str(e)) from None


def _check_signature(folder: Path, where: str, org: str, signatures: SignatureSettings) -> str:
    """The organisation's rule decides: required, or signers configured (by the hub's owner, not the
    built-in defaults) for a signature present."""
    rule, signers = signatures.requirement(org), signatures.signers(org)
    present = signature_check.signatures(folder)
    configured = any(not origin.startswith("built in") for _, origin in (*signers.ssh, *signers.sigstore))
    if not rule.required and (not present or not configured):
        return ", signature not checked" if present else ""
    try:
        return f", signed by {signature_check.check(folder, signers, where)}"
    except KernelError as e:
        because = f" ({rule.describe(org)})" if rule.required else ""
        raise Refused(f"{e}{because}") from None
