"""kbuild's own signatures: SSH signatures over a variant's metadata.json, made and checked by
OpenSSH's `ssh-keygen -Y` as git makes and checks signed commits (docs/formats.md, "Signatures").

A signature is `metadata.json.sig` beside metadata.json in a variant folder (on a hub it is kept in
`signatures/<variant>/`: kbuild/repo_layout.py), made with the namespace `kbuild`; the
signers an organisation trusts are an allowed_signers file in git's format (`principal key`).
No cryptography is done here: ssh-keygen does all of it, this module runs it and reads its answer.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ..errors import SignatureRefused

NAMESPACE = "kbuild"  # ssh-keygen -Y -n: a signature made for git or for a file elsewhere never counts here
SIGNATURE = "metadata.json.sig"
TIMEOUT = 60
_KEY = re.compile(r"with (\S+ key \S+)")  # `Good "kbuild" signature ... with ED25519 key SHA256:...`


@dataclass(frozen=True)
class SshSigner:
    principal: str  # as the allowed_signers file names it
    key: str  # "ED25519 key SHA256:..."
    allowed_signers: Path  # the file that lists it

    def describe(self) -> str:
        return f"{self.principal} ({self.key}, listed in {self.allowed_signers})"


def verify(metadata: bytes, signature: Path, allowed_signers: list[Path], where: str) -> SshSigner:
    """The signer of `signature` over `metadata` among the `allowed_signers` files; SignatureRefused
    (one line, naming the signer when the signature says who) when it is not a good signature of a
    listed key."""
    if not ssh_keygen_found():
        raise SignatureRefused(f"{where}: checking its SSH signature needs ssh-keygen (OpenSSH), which is not on PATH; "
                               "install openssh-client")
    listed = [(listing, principal) for listing in allowed_signers for principal in _principals(signature, listing)]
    for listing, principal in listed:  # the good path: two ssh-keygen runs
        ok, answer = _run(["-Y", "verify", "-f", str(listing), "-I", principal, "-n", NAMESPACE,
                           "-s", str(signature)], metadata)
        if ok:
            key = _KEY.search(answer)
            return SshSigner(principal, key.group(1) if key else "key", listing)
    # refused: say whether the signature is bad (and whose it claims to be) or good but by an unlisted key
    good, out = _run(["-Y", "check-novalidate", "-n", NAMESPACE, "-s", str(signature)], metadata)
    if not good:
        who = f"{listed[0][1]} (listed in {listed[0][0]})" if listed else "a key no allowed_signers file lists"
        raise SignatureRefused(f"{where}: {SIGNATURE} by {who} is not a good signature of this metadata.json "
                               f"(made over other content, or not a {NAMESPACE!r} SSH signature): {out}")
    key = _KEY.search(out)
    if listed:  # a good signature by a listed key that its line does not allow here (namespaces=, valid-before=)
        raise SignatureRefused(f"{where}: signed by {listed[0][1]} ({key.group(1) if key else 'an SSH key'}), whose "
                               f"line in {listed[0][0]} does not allow this signature (its namespaces or validity)")
    raise SignatureRefused(f"{where}: signed by {key.group(1) if key else 'an SSH key'}, which no trusted "
                           "allowed_signers file lists")


def key_of(signature: Path, metadata: bytes) -> str | None:
    """The key a good signature was made with ("ED25519 key SHA256:..."), None when it is not good."""
    good, out = _run(["-Y", "check-novalidate", "-n", NAMESPACE, "-s", str(signature)], metadata)
    key = _KEY.search(out) if good else None
    return key.group(1) if key else None


def ssh_keygen_found() -> bool:
    return shutil.which("ssh-keygen") is not None


def _principals(signature: Path, listing: Path) -> list[str]:
    """Who `listing` says made the signature's key (ssh-keygen matches the key only, not the content)."""
    ok, out = _run(["-Y", "find-principals", "-s", str(signature), "-f", str(listing)], b"", stdout_only=True)
    return [line.strip() for line in out.splitlines() if line.strip()] if ok else []


def _run(args: list[str], stdin: bytes, stdout_only: bool = False) -> tuple[bool, str]:
    """(exit 0, what it printed) of ssh-keygen with `args`; on failure its last line."""
    try:
        done = subprocess.run(["ssh-keygen", *args], input=stdin, capture_output=True, timeout=TIMEOUT)
    except (OSError, subprocess.TimeoutExpired) as e:
        return False, f"ssh-keygen could not run: {e}"
    out = done.stdout if stdout_only else done.stdout + done.stderr
    if done.returncode == 0:
        return True, out.decode(errors="replace").strip()
    lines = (done.stderr + done.stdout).decode(errors="replace").strip().splitlines()
    return False, lines[-1].rstrip(".") if lines else f"ssh-keygen exited {done.returncode}"
