"""Who may read and who may write: bearer tokens from a file, one per line.

Writes always need a token the server knows (no `Authorization` → 401, an unknown token → 403).
Reads are public unless the server runs `--private`; a public server ignores an unknown token on
reads, so a user whose HF_TOKEN belongs to huggingface.co can still download from it.
"""

from __future__ import annotations

import base64
import binascii
import errno
import hmac
import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path

from kbuild_hub.errors import HubError

TOKEN_FILE_NAME = ".token"


class Unauthorized(HubError):
    http_status = 401
    headers = {"WWW-Authenticate": 'Bearer realm="kbuild hub"'}  # RFC 6750: a bearer token is what is missing


class PrivateRead(Unauthorized):
    error_code = "RepoNotFound"


class Forbidden(HubError):
    http_status = 403


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
        values = _read(token_file)
        if not values:
            raise HubError(f"{token_file}: no token in it", hint="write one token per line")
        return Tokens(values, token_file)
    path = root / TOKEN_FILE_NAME
    if path.is_symlink() or path.exists():
        values = _read(path)
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
    return _read(path)


def _read(path: Path) -> tuple[str, ...]:
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


def request_token(authorization: str | None) -> str | None:
    """The token an `Authorization` header carries, or None: `Bearer <token>` (huggingface_hub),
    or `Basic` with the token as the password, any user name (what a browser sends after asking,
    and git's credential helpers: the Hub takes a token as a password too)."""
    if not authorization:
        return None
    scheme, _, value = authorization.partition(" ")
    if scheme.lower() == "bearer":
        return value.strip() or None
    if scheme.lower() == "basic":
        try:
            pair = base64.b64decode(value.strip(), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return None
        return pair.partition(":")[2] or None
    return None


def check_access(tokens: Tokens, access: str, token: str | None, *, public_read: bool) -> None:
    """Raise Unauthorized / Forbidden unless `token` may do `access` ("none", "read", "write",
    "user")."""
    if access == "none" or (access == "read" and public_read):
        return
    if token is None:
        if access == "read":
            # As the Hub answers for a private repo: huggingface_hub then says "repository not
            # found … if it is private, make sure you are authenticated".
            raise PrivateRead("this hub is private: send `Authorization: Bearer <token>`",
                              hint="pass token= to HfApi or set HF_TOKEN")
        raise Unauthorized("this request needs `Authorization: Bearer <token>`",
                           hint="pass token= to HfApi or set HF_TOKEN")
    if not tokens.knows(token):
        if access == "user":
            raise Unauthorized("Invalid credentials in Authorization header")
        raise Forbidden("the token is not one this hub accepts")
