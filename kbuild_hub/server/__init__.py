"""`kbuild hub serve`: the local git-backed hub over the Hugging Face Hub HTTP API subset that
huggingface_hub and Hugging Face's `kernels` loader use (docs/formats.md, "The Hub HTTP API"), on
starlette + uvicorn.

It serves what the git repositories hold (GitStore), not a copy: a branch moved with `git push`
into the hub folder is what the next request sees.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Callable

from kbuild.signatures.rules import from_environment
from kbuild_hub.errors import HubError
from kbuild_hub.gitstore import GitStore
from kbuild_hub.serve_options import ServeOptions, Upstream
from kbuild_hub.server.app import HubApp
from kbuild_hub.server.context import Hub, ServerConfig
from kbuild_hub.tokens import Tokens, load_tokens
from kbuild_hub.upstream.cache import FOLDER, UpstreamCache
from kbuild_hub.upstream.client import UpstreamClient
from kbuild_hub.upstream.policy import UpstreamPolicy

LISTEN_BACKLOG = 2048

__all__ = ["HubApp", "ServeOptions", "ServerConfig", "Tokens", "Upstream", "build_app", "listen", "load_tokens",
           "serve"]


def build_app(config: ServerConfig, log: Callable[[str], None] = lambda line: None,
              upstream: Upstream | None = None) -> HubApp:
    """The app over `config.root`; with `upstream`, repos this hub lacks come from that hub
    (kbuild_hub/upstream/). A hub folder that holds a cache of an earlier upstream serves it,
    read-only, also without one."""
    cache = None
    if upstream is not None or (config.root / FOLDER).is_dir():
        client = None if upstream is None else UpstreamClient(
            upstream.url, upstream.token, connect_timeout=upstream.connect_timeout, read_timeout=upstream.read_timeout)
        cache = UpstreamCache(config.root, client, from_environment(os.environ), log)
    hub = Hub(config, GitStore(config.root, max_file_size=config.max_file_size), upstream=cache)
    return HubApp(hub, log)


def serve(options: ServeOptions, log: Callable[[str], None] | None = None) -> None:
    """Serve `options.root` until interrupted, as `options` says (builder/config/hub_service.py
    resolves them from `kbuild hub serve`'s flags)."""
    import uvicorn  # deferred: only the server needs it

    log = log or _stderr
    root, tokens, upstream = options.root, options.tokens, options.upstream
    config = ServerConfig(root=root, tokens=tokens, public_read=options.public_read,
                          max_file_size=options.max_file_size, max_commit_size=options.max_commit_size,
                          trusted_orgs=options.trusted_orgs,
                          upstream_policy=UpstreamPolicy(options.upstream_orgs, options.allow_shadowing))
    app = build_app(config, log, upstream)
    app.hub.store.sweep_scratch(3600)  # what a killed server left mid-upload (another may share the root)
    host = options.host
    sock = listen(host, options.port)
    url = f"http://{host if ':' not in host else f'[{host}]'}:{sock.getsockname()[1]}"
    made = "created" if tokens.generated else "from"
    log(f"kbuild hub serve: {root} on {url} "
        f"(reads {'public' if options.public_read else 'need a token'}; write token {made} {tokens.source})")
    if upstream is not None:
        log(f"  in front of {upstream.url} (token: {'yes' if upstream.token else 'none'}): repos this hub lacks "
            f"come from there, verified, cached in {root / '.upstream'}")
    log(f"  use it with HF_ENDPOINT={url} or HfApi(endpoint={url!r}, token=...)")
    from kbuild_hub.server.connections import Limits, uvicorn_config  # noqa: PLC0415 - cost: uvicorn, only serving needs it

    limits = Limits() if options.max_per_client is None else Limits(max_per_client=options.max_per_client)
    server = uvicorn.Server(uvicorn_config(app, options.header_timeout, options.max_connections, limits))
    with sock:
        try:
            server.run(sockets=[sock])
        finally:
            app.close()


def listen(host: str, port: int) -> socket.socket:
    """The listening socket, bound here so a busy port is a one-line error (uvicorn would exit)."""
    # IPPROTO_TCP named, not 0 (what socket.create_server passes): asyncio sets TCP_NODELAY only
    # on accepted sockets whose proto says TCP. Without it a keep-alive request waited ~40 ms for
    # the client's delayed ACK before its response body left (Nagle), on every reused connection.
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        # A deep backlog: a burst of connections must not leave a real client's SYN unanswered
        # (a dropped SYN is retried after 1 s); the registry decides who stays, not the kernel.
        sock.listen(LISTEN_BACKLOG)
        return sock
    except OSError as e:
        sock.close()
        raise HubError(f"cannot listen on {host}:{port}: {e.strerror}",
                       hint="pick another --port, or stop the server already using it") from None


def _stderr(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()
