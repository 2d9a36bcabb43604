"""`kbuild lock` and `kbuild download`: pin the kernels a Python project uses, and pre-fetch them.

A project names its kernels in pyproject.toml's [tool.kbuild.kernels]
(builder/config/kernel_requests.py). `kbuild lock` writes kernels.lock beside it (kbuild.lockfile's
format); `kbuild download` fetches what the lock names into the cache, so `kbuild.load_kernel`
works offline.
"""

from __future__ import annotations

from pathlib import Path

from builder.commands.arguments import add_hub, folder
from builder.config.environment import from_environment as builder_settings
from kbuild_common.errors import LockError, UsageError

PROJECT_HINT = "pass a project folder (with pyproject.toml)"


def add_parser(subparsers) -> None:
    """Both commands: lock, then download."""
    p = subparsers.add_parser("lock", help="pin the kernels a project uses ([tool.kbuild.kernels]) in kernels.lock")
    p.add_argument("dir", nargs="?", default=".", type=Path, help="the project (with pyproject.toml)")
    add_hub(p)
    p.set_defaults(handler=run_lock)

    p = subparsers.add_parser("download", help="fetch the kernels kernels.lock names into the cache, for offline use")
    p.add_argument("dir", nargs="?", default=".", type=Path, help="the project (with kernels.lock)")
    add_hub(p)
    p.add_argument("--all-variants", action="store_true", help="every locked variant, not only this system's")
    p.add_argument("--backend", default=None, help="the backend to fetch for (default: this torch's)")
    p.set_defaults(handler=run_download)


def run_lock(args, reporter) -> int:
    from builder.config.kernel_requests import PYPROJECT, requested_kernels
    from kbuild.lockfile import LOCK_NAME, lock_kernel, write_lock

    project = folder(args.dir, hint=PROJECT_HINT).resolve()
    hub = builder_settings().hub_setting(args.hub).value  # None: the default local hub
    locked = []
    for repo_id, revision, version in requested_kernels(project / PYPROJECT):
        with _runtime_errors():
            entry = lock_kernel(repo_id, revision=revision, version=version, hub=hub)
        reporter.info(f"{entry.repo_id}@{entry.revision}: {entry.commit[:12]}, {len(entry.variants)} variant(s)")
        locked.append(entry)
    write_lock(project / LOCK_NAME, locked)
    reporter.result(f"wrote {project / LOCK_NAME} ({len(locked)} kernel(s))")
    return 0


def run_download(args, reporter) -> int:
    from kbuild.lockfile import LOCK_NAME, download_locked

    lockfile = folder(args.dir, hint=PROJECT_HINT).resolve() / LOCK_NAME
    if not lockfile.is_file():
        raise UsageError(f"{lockfile}: no lock file", hint=f"run kbuild lock {args.dir}")
    with _runtime_errors():
        folders = download_locked(lockfile, hub=builder_settings().hub_setting(args.hub).value, backend=args.backend,
                                  all_variants=args.all_variants)
    for cached in folders:
        reporter.info(f"cached {cached}")
    reporter.result(f"{len(folders)} variant(s) in the cache, verified")
    return 0


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
