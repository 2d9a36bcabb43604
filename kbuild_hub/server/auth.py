"""Who may read and who may write: bearer tokens from a file, one per line.

Writes always need a token the server knows (no `Authorization` → 401, an unknown token → 403).
Reads are public unless the server runs `--private`; a public server ignores an unknown token on
reads, so a user whose HF_TOKEN belongs to huggingface.co can still download from it. The token
files themselves are kbuild_hub/tokens.py's.
"""

from __future__ import annotations

import base64
import binascii

from kbuild_hub.errors import HubError
from kbuild_hub.tokens import Tokens


class Unauthorized(HubError):
    http_status = 401
    headers = {"WWW-Authenticate": 'Bearer realm="kbuild hub"'}  # RFC 6750: a bearer token is what is missing


class PrivateRead(Unauthorized):
    error_code = "RepoNotFound"


class Forbidden(HubError):
    http_status = 403


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
