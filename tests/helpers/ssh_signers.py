"""SSH signing keys for the signature tests, made by the real ssh-keygen, and the allowed_signers
files (git's format) that trust them."""

from __future__ import annotations

import subprocess
from pathlib import Path


def keygen(folder: Path, name: str) -> Path:
    """A new ed25519 key pair made by ssh-keygen; the private key's path."""
    folder.mkdir(parents=True, exist_ok=True)
    key = folder / name
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(key)], check=True)
    return key


def fingerprint(key: Path) -> str:
    return subprocess.run(["ssh-keygen", "-l", "-f", f"{key}.pub"], check=True, capture_output=True,
                          text=True).stdout.split()[1]


def allowed_signers(path: Path, **principals: Path) -> Path:
    """git's allowed_signers format: `principal key-type key` per line."""
    lines = [f"{who} {' '.join(Path(f'{key}.pub').read_text().split()[:2])}" for who, key in principals.items()]
    path.write_text("\n".join(lines) + "\n")
    return path
