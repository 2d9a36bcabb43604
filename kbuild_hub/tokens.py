"""Token files, one token per line: the server's write tokens (`--token-file`, else `<root>/.token`)
and the token sent to an upstream (`--upstream-token-file`). Each must be a regular file, not a
link, that only its owner can read (mode 0600); a missing `<root>/.token` is created so.

Below the server (server/auth.py checks requests against `Tokens`), so that `kbuild hub serve`'s
options can be resolved, token files read, before anything of the server loads.
"""

from __future__ import annotations

import errno
import hmac
import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path

from kbuild_hub.errors import HubError

TOKEN_FILE_NAME = ".token"


@dataclass(frozen=True)
class Tokens:
    values: tuple[str, ...]
    source: Path
    generated: bool = False

    def knows(self, token: str) -> bool:
        # Compare every token, so timing says nothing about which one nearly matched.
        found = False
        for known in self.values:
            found |= hmac.compare_digest(known.encode(), token.encode())
        return found


def load_tokens(token_file: Path | None, root: Path) -> Tokens:
    """Tokens from `token_file`; without one, `<root>/.token` (created with mode 0600 and a fresh
    random token the first time). Neither may be a link or readable by others."""
    if token_file is not None:
        values = read_token_file(token_file)
        if not values:
            raise HubError(f"{token_file}: no token in it", hint="write one token per line")
        return Tokens(values, token_file)
    path = root / TOKEN_FILE_NAME
    if path.is_symlink() or path.exists():
        values = read_token_file(path)
        if values:
            return Tokens(values, path)
    token = "kb_" + secrets.token_urlsafe(32)
    root.mkdir(parents=True, exist_ok=True)
    try:  # never through a link: its target would be truncated and given the token
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    except OSError as e:
        raise HubError(f"{path}: cannot write the token file ({e.strerror})") from None
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    os.chmod(path, 0o600)
    return Tokens((token,), path, generated=True)


def read_token_file(path: Path) -> tuple[str, ...]:
    """A token file's tokens: a regular file (not a link) that only its owner can read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as e:
        why = "it is a symbolic link" if e.errno == errno.ELOOP else e.strerror
        raise HubError(f"{path}: cannot read the token file ({why})",
                       hint="point --token-file at the file itself" if e.errno == errno.ELOOP else None) from None
    with os.fdopen(fd) as f:
        mode = os.fstat(f.fileno()).st_mode
        if not stat.S_ISREG(mode):
            raise HubError(f"{path}: the token file is not a regular file")
        if mode & 0o077:
            raise HubError(f"{path}: the token file is readable by others (mode {stat.S_IMODE(mode):04o})",
                           hint=f"chmod 600 {path}")
        lines = f.read().splitlines()
    return tuple(t for t in (line.strip() for line in lines) if t and not t.startswith("#"))
