"""What `kbuild hub serve` and `kbuild hub mirror` were asked for, resolved once: the flags checked,
the upstream through the one cascade (`--upstream`, else `KBUILD_HUB_UPSTREAM`; `off`: none), the
token files read with their 0600 rule (kbuild_hub/tokens.py). Every error is one line naming the
flag, the variable or the file; `flags` is the argparse namespace of the command
(builder/commands/hub.py declares its flags)."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from builder.config.cascade import resolve, value
from builder.config.environment import BuilderSettings
from builder.hub.address import parse_hub_url
from kbuild_common.errors import UsageError
from kbuild_hub.errors import HubError
from kbuild_hub.serve_options import ServeOptions, Upstream
from kbuild_hub.tokens import Tokens, load_tokens, read_token_file

UPSTREAM_ENV = "KBUILD_HUB_UPSTREAM"


def serve_options(flags, settings: BuilderSettings) -> ServeOptions:
    """`kbuild hub serve`'s options. Without `--token-file` the write token is `<root>/.token`,
    created (mode 0600, a random token) when missing."""
    if not 0 <= flags.port <= 65535:
        raise UsageError(f"--port: expected 0-65535, got {flags.port}")
    for flag, number, unit in (("--max-file-size", flags.max_file_size, " of bytes"),
                               ("--max-commit-size", flags.max_commit_size, " of bytes"),
                               ("--max-connections", flags.max_connections, ""),
                               ("--max-connections-per-client", flags.max_connections_per_client, ""),
                               ("--header-timeout", flags.header_timeout, " of seconds")):
        if not number > 0:
            raise UsageError(f"{flag}: expected a positive number{unit}, got {number}")
    if flags.token_file is not None and not flags.token_file.is_file():
        raise UsageError(f"--token-file: no file at {flags.token_file}", hint="write one token per line")
    upstream = _upstream(flags, settings.hub_upstream)
    root = flags.root.expanduser()
    return ServeOptions(
        root=root, tokens=_write_tokens(flags.token_file, root), host=flags.host, port=flags.port,
        public_read=flags.public_read, trusted_orgs=frozenset(flags.trusted_org),
        max_file_size=flags.max_file_size, max_commit_size=flags.max_commit_size,
        max_connections=flags.max_connections, max_per_client=flags.max_connections_per_client,
        header_timeout=flags.header_timeout, upstream=upstream, upstream_orgs=frozenset(flags.upstream_org),
        allow_shadowing=flags.allow_shadowing)


def _upstream(flags, from_env: str | None) -> Upstream | None:
    """The upstream from --upstream, else $KBUILD_HUB_UPSTREAM; the flags that need one, checked."""
    url = value(resolve(flag=("--upstream", flags.upstream), env=(UPSTREAM_ENV, from_env), parse=parse_hub_url,
                        can_turn_off=True))
    if url is None:
        # an offline hub serves a mirror's cache: --upstream-org still decides which names come from it
        given = [flag for flag, on in (("--upstream-token-file", flags.upstream_token_file),
                                       ("--allow-shadowing", flags.allow_shadowing)) if on]
        if given:
            raise UsageError(f"{given[0]}: needs --upstream URL (or ${UPSTREAM_ENV})")
        return None
    connect, read = flags.upstream_timeout
    if not (connect > 0 and read > 0):
        raise UsageError(f"--upstream-timeout: expected two positive numbers of seconds, got {connect} {read}")
    return Upstream(url, upstream_token(flags.upstream_token_file), connect_timeout=connect, read_timeout=read)


def _write_tokens(token_file: Path | None, root: Path) -> Tokens:
    """The server's write tokens; a --token-file others can read, or a link, is a bad argument (exit 2)."""
    if token_file is None:
        return load_tokens(None, root)  # <root>/.token: its errors are the hub's own
    try:
        return load_tokens(token_file, root)
    except HubError as e:
        raise UsageError(f"--token-file: {e}", hint=e.hint) from None


def upstream_token(path: Path | None) -> str | None:
    """The token of --upstream-token-file (mode 0600, as the server's token file); None without one."""
    if path is None:
        return None
    try:
        tokens = read_token_file(path)
    except HubError as e:
        raise UsageError(f"--upstream-token-file: {e}", hint=e.hint) from None
    if not tokens:
        raise UsageError(f"--upstream-token-file: no token in {path}")
    return tokens[0]


@dataclass(frozen=True)
class MirrorSource:
    """Where `kbuild hub mirror` copies from and into."""

    url: str  # the upstream hub (--from)
    token: str | None = field(repr=False)  # sent to it only (--upstream-token-file)
    root: Path  # the hub folder whose upstream cache it fills (--root)
    python: str | None  # the Python whose transformers --transformers reads; None without it


def mirror_source(flags) -> MirrorSource:
    """`kbuild hub mirror`'s hubs and Python; what to mirror is the command's (REPO, --lock, --transformers)."""
    if flags.source is None:
        raise UsageError("--from: expected the URL of the hub to mirror from, e.g. --from https://huggingface.co")
    url = parse_hub_url(flags.source, "--from")
    if flags.python is not None and not flags.transformers:
        raise UsageError("--python: only read with --transformers")
    root = flags.root.expanduser()
    if root.exists() and not root.is_dir():
        raise UsageError(f"--root: {root} is not a folder")
    python = (flags.python or sys.executable) if flags.transformers else None
    return MirrorSource(url, upstream_token(flags.upstream_token_file), root, python)
