"""`kbuild lock` and `kbuild download`: pin the kernels a Python project uses, and pre-fetch them.

A project names its kernels in pyproject.toml:

    [tool.kbuild.kernels]
    "kernels-community/activation" = 1        # version 1 (branch v1)
    "org/rmsnorm" = "<40-hex commit>"         # or a branch / tag name
    "org/rotary@v2" = true                    # the pin in the key

`kbuild lock` writes kernels.lock beside it (kbuild.lock's format); `kbuild download` fetches what
the lock names into the cache, so `kbuild.load_kernel` works offline. The CLI wires both in with
`lock_cli.add_parsers(sub)`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from builder.errors import ExitCode, KbuildError, UsageError
from builder._toml import tomllib
from builder.config.settings import from_environment as builder_settings

PYPROJECT = "pyproject.toml"


class LockError(KbuildError):
    exit_code = ExitCode.LOCK


def add_parsers(subparsers) -> None:
    p = subparsers.add_parser("lock", help="pin the kernels a project uses ([tool.kbuild.kernels]) in kernels.lock")
    p.add_argument("dir", nargs="?", default=".", type=Path, help="the project (with pyproject.toml)")
    _hub_option(p)
    p.set_defaults(handler=_lock)

    p = subparsers.add_parser("download", help="fetch the kernels kernels.lock names into the cache, for offline use")
    p.add_argument("dir", nargs="?", default=".", type=Path, help="the project (with kernels.lock)")
    _hub_option(p)
    p.add_argument("--all-variants", action="store_true", help="every locked variant, not only this system's")
    p.add_argument("--backend", default=None, help="the backend to fetch for (default: this torch's)")
    p.set_defaults(handler=_download)


def _hub_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--hub", default=None, help="a folder/file:// (local hub) or http(s):// URL "
                   "(default: $KBUILD_HUB, else $HF_ENDPOINT, else ~/.cache/kbuild/hub)")


def requested_kernels(pyproject: Path) -> list[tuple[str, str | None, int | None]]:
    """(repo_id, revision, version) for each entry of [tool.kbuild.kernels]."""
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except OSError as e:
        raise UsageError(f"{pyproject}: cannot read it ({e.strerror})", hint="pass the project folder") from None
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"{pyproject}: not valid TOML ({e})") from None
    table = data.get("tool", {}).get("kbuild", {}).get("kernels")
    if not isinstance(table, dict) or not table:
        raise UsageError(f"{pyproject}: no [tool.kbuild.kernels] table",
                         hint='add e.g.  [tool.kbuild.kernels]  "org/repo" = 1')
    requests = []
    for key, value in table.items():
        if value is True and "@" in key:
            requests.append((key, None, None))
        elif isinstance(value, int) and not isinstance(value, bool):
            requests.append((key, None, value))
        elif isinstance(value, str):
            requests.append((key, value, None))
        else:
            raise UsageError(f"{pyproject}: [tool.kbuild.kernels] {key!r} = {value!r}: expected a version number, "
                             'a branch/tag/commit string, or true with the pin in the key ("org/repo@v1" = true)')
    return requests


def _lock(args, reporter) -> int:
    from kbuild.lock import LOCK_NAME, lock_kernel, write_lock

    folder = _folder(args.dir)
    hub = args.hub or builder_settings().hub  # None: the default local hub (the one hub rule)
    locked = []
    for repo_id, revision, version in requested_kernels(folder / PYPROJECT):
        with _runtime_errors():
            entry = lock_kernel(repo_id, revision=revision, version=version, hub=hub)
        reporter.info(f"{entry.repo_id}@{entry.revision}: {entry.commit[:12]}, {len(entry.variants)} variant(s)")
        locked.append(entry)
    write_lock(folder / LOCK_NAME, locked)
    reporter.result(f"wrote {folder / LOCK_NAME} ({len(locked)} kernel(s))")
    return 0


def _download(args, reporter) -> int:
    from kbuild.lock import LOCK_NAME, download_locked

    lockfile = _folder(args.dir) / LOCK_NAME
    if not lockfile.is_file():
        raise UsageError(f"{lockfile}: no lock file", hint=f"run kbuild lock {args.dir}")
    with _runtime_errors():
        folders = download_locked(lockfile, hub=args.hub, backend=args.backend, all_variants=args.all_variants)
    for folder in folders:
        reporter.info(f"cached {folder}")
    reporter.result(f"{len(folders)} variant(s) in the cache, verified")
    return 0


def _folder(path: Path) -> Path:
    if not path.is_dir():
        raise UsageError(f"{path}: not a folder", hint="pass a project folder (with pyproject.toml)")
    return path.resolve()


class _runtime_errors:
    """The runtime's errors (kbuild.errors.KernelError), and the cache's disk failing while a
    download writes to it, as one-line CLI errors."""

    def __enter__(self):
        return self

    def __exit__(self, kind, error, tb):
        from kbuild.errors import KernelError

        if isinstance(error, (KernelError, OSError)):
            raise LockError(str(error)) from None
        return False
