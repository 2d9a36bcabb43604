"""`kbuild hub serve`, `kbuild hub mirror` and `kbuild hub gc`: their arguments and their handlers
(parse → one library call): the local hub served over the Hugging Face Hub HTTP API
(kbuild_hub/server/), repos copied into it from an upstream hub for offline serving
(builder/hub/mirror.py), and what failed publishes left in it collected (kbuild_hub/gitstore.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

from builder.config.environment import from_environment as builder_settings
from builder.hub.address import DEFAULT_LOCAL_HUB
from kbuild_common.errors import UsageError

DEFAULT_PORT = 8080
DEFAULT_MAX_FILE_SIZE = 2 << 30
DEFAULT_MAX_COMMIT_SIZE = 16 << 30


def add_parser(subparsers) -> argparse.ArgumentParser:
    """Register `hub` with its `serve` subcommand on the CLI's subparsers; returns `serve`'s parser."""
    hub = subparsers.add_parser("hub", help="serve the local hub over the Hugging Face Hub HTTP API (serve), "
                                "copy repos into it from an upstream hub for offline use (mirror), "
                                "or collect what failed publishes left in it (gc)")
    commands = hub.add_subparsers(dest="hub_command", required=True, metavar="HUB_COMMAND")
    serve = add_serve_parser(commands)
    add_mirror_parser(commands)
    add_gc_parser(commands)
    return serve


def _root_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--root", type=Path, default=DEFAULT_LOCAL_HUB, metavar="DIR",
                   help=f"the local hub folder (default: {DEFAULT_LOCAL_HUB})")


def add_gc_parser(hub_subparsers) -> argparse.ArgumentParser:
    p = hub_subparsers.add_parser(
        "gc", help="collect what failed or killed publishes left in a local hub",
        description="Remove git objects no branch or tag reaches and scratch folders, older than the grace "
                    "period (a publish in flight writes its objects before it moves its branch).")
    _root_argument(p)
    p.add_argument("--grace", type=float, default=3600.0, metavar="S",
                   help="keep what is younger than S seconds (default: 3600; 0 only when nothing publishes)")
    p.set_defaults(handler=run_gc)
    return p


def add_mirror_parser(hub_subparsers) -> argparse.ArgumentParser:
    p = hub_subparsers.add_parser(
        "mirror", help="copy repos from an upstream hub into a hub folder, verified, for offline serving",
        description="Fetch repos at given revisions from an upstream hub into the hub folder's upstream cache "
                    "(the one `kbuild hub serve --upstream` fills), with the same verification: kernel variants "
                    "against their metadata.json digest, every file against the upstream's listing. What is "
                    "there already is not fetched again. `kbuild hub serve --root DIR` then serves them offline.")
    p.add_argument("repos", nargs="*", metavar="REPO[@REV]",
                   help="ORG/NAME, ORG/NAME@vN, ORG/NAME@BRANCH or ORG/NAME@SHA (without @: the newest vN branch "
                        "of a kernel, main of a model or dataset)")
    p.add_argument("--from", dest="source", default=None, metavar="URL",
                   help="the upstream hub to copy from, e.g. https://huggingface.co (required)")
    p.add_argument("--root", type=Path, default=DEFAULT_LOCAL_HUB, metavar="DIR",
                   help=f"the hub folder, as `kbuild hub serve --root` takes (default: {DEFAULT_LOCAL_HUB})")
    p.add_argument("--repo-type", choices=("kernel", "model", "dataset"), default="kernel",
                   help="the type of the REPO arguments (default: kernel)")
    p.add_argument("--lock", type=Path, action="append", default=[], metavar="FILE",
                   help="mirror every kernel a lock file pins, at its commit: kbuild's kernels.lock or Hugging Face "
                        "kernels' (repeatable)")
    p.add_argument("--transformers", action="store_true",
                   help="mirror every kernel repo the installed transformers maps by default (its layer and hub "
                        "function mappings), read from transformers itself with --python")
    p.add_argument("--python", default=None, metavar="PY",
                   help="the Python whose transformers --transformers reads (default: the one running kbuild)")
    p.add_argument("--variant", action="append", default=[], metavar="V",
                   help="of kernel repos take only this variant under build/ (repeatable; everything outside build/ "
                        "is always taken)")
    p.add_argument("--upstream-token-file", type=Path, default=None, metavar="F",
                   help="the token sent to the upstream (mode 0600; default: none)")
    p.set_defaults(handler=run_mirror)
    return p


def run_mirror(args, reporter) -> int:
    from builder.config.hub_service import mirror_source
    from builder.hub.mirror import mirror, requests_for

    source = mirror_source(args)
    requests = requests_for(args.repos, args.repo_type, args.lock, source.python, reporter)
    if not requests:
        raise UsageError("nothing to mirror: name REPO[@REV] arguments, --lock FILE or --transformers")
    if args.variant and not any(r.repo_type == "kernel" for r in requests):
        raise UsageError(f"--variant: only kernel repos have variants; the repos named are {args.repo_type}s")
    return mirror(source.url, source.token, source.root, requests, set(args.variant) or None, reporter,
                  signatures=builder_settings().signature_rules)


def run_gc(args, reporter) -> int:
    if args.grace < 0:
        raise UsageError(f"--grace: expected seconds >= 0, got {args.grace}")
    root = args.root.expanduser()
    if not root.is_dir():
        raise UsageError(f"--root: no local hub at {root}")
    from kbuild_hub.gitstore import GitStore

    done = GitStore(root).gc(args.grace)
    reporter.info(f"{root}: {done['repos']} repo(s) collected, {done['scratch_removed']} scratch folder(s) "
                  f"removed, {done['freed_bytes'] / 1e6:.1f} MB freed")
    return 0


def add_serve_parser(hub_subparsers) -> argparse.ArgumentParser:
    """Register `serve` under an existing `hub` command's subparsers."""
    p = hub_subparsers.add_parser(
        "serve", help="serve a local hub over the Hugging Face Hub HTTP API",
        description="Serve a local git-backed hub so huggingface_hub (HF_ENDPOINT / HfApi(endpoint=…)) and "
                    "Hugging Face's `kernels` loader can publish to it and load from it.")
    _root_argument(p)
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default: {DEFAULT_PORT})")
    p.add_argument("--token-file", type=Path, default=None, metavar="F",
                   help="write tokens, one per line (default: <root>/.token, created with a random token)")
    access = p.add_mutually_exclusive_group()
    access.add_argument("--public-read", dest="public_read", action="store_true", default=True,
                        help="anyone may read (default)")
    access.add_argument("--private", dest="public_read", action="store_false", help="reads need a token too")
    p.add_argument("--max-file-size", type=int, default=DEFAULT_MAX_FILE_SIZE, metavar="BYTES",
                   help=f"largest file an upload may carry (default: {DEFAULT_MAX_FILE_SIZE})")
    p.add_argument("--max-commit-size", type=int, default=DEFAULT_MAX_COMMIT_SIZE, metavar="BYTES",
                   help="largest commit request (all its files, base64) an upload may send; a larger declared "
                        f"Content-Length is refused before its body is read (default: {DEFAULT_MAX_COMMIT_SIZE})")
    p.add_argument("--trusted-org", action="append", default=[], metavar="ORG",
                   help="answer trustedKernelPublisher=true for this organisation (repeatable); "
                        "others need the loader's trust_remote_code=True")
    p.add_argument("--max-connections", type=int, default=512, metavar="N",
                   help="open connections at most; more are closed at once (default: 512)")
    p.add_argument("--max-connections-per-client", type=int, default=64, metavar="N",
                   help="open connections per client address at most (default: 64); when the server is full, "
                        "the address holding the most loses its oldest")
    p.add_argument("--header-timeout", type=float, default=10.0, metavar="S",
                   help="close a connection whose request headers are not complete after S seconds (default: 10)")
    up = p.add_argument_group("upstream", "serve the repos this hub lacks from another hub (docs/upstream.md)")
    up.add_argument("--upstream", default=None, metavar="URL",
                    help="the hub to pass reads through to, e.g. https://huggingface.co (default: "
                         "$KBUILD_HUB_UPSTREAM, else none)")
    up.add_argument("--upstream-token-file", type=Path, default=None, metavar="F",
                    help="the token sent to the upstream (mode 0600; default: none: clients' tokens are never "
                         "forwarded)")
    up.add_argument("--upstream-org", action="append", default=[], metavar="ORG",
                    help="an organisation with repos on this hub whose other names may still come from the upstream "
                         "(repeatable; by default a local organisation's missing names are not looked up upstream)")
    up.add_argument("--allow-shadowing", action="store_true",
                    help="let clients create a repo here whose name the upstream has (refused by default)")
    up.add_argument("--upstream-timeout", type=float, nargs=2, default=(5.0, 30.0), metavar=("CONNECT", "READ"),
                    help="seconds to wait for the upstream to accept a connection and for each read (default: 5 30); "
                         "past them a branch is served as last seen")
    p.set_defaults(handler=run)
    return p


def run(args, reporter) -> int:
    from builder.config.hub_service import serve_options
    from kbuild_hub.server import serve  # deferred: starlette and uvicorn load only for `hub serve`

    serve(serve_options(args, builder_settings()), log=reporter.info)
    return 0
