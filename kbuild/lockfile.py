"""Lock files: `kernels.lock` pins each kernel a project uses to a commit and records the sha256 of
every variant's metadata.json there (which in turn records a digest of each of its files).

    {"kbuild-lock": 1,
     "kernels": {"org/repo": {"revision": "v1", "commit": "<40 hex>", "hub": null,
                              "variants": {"torch-cuda": "<sha256 hex of metadata.json>", …}}}}

`load_kernel` loads a locked kernel from the cache and never makes a network request;
`get_locked_kernel` downloads it when it is missing. Both check the metadata.json they import
against the lock. A lock file is the project's consent to run those kernels: no trust check.
"""

from __future__ import annotations

import hashlib
import json
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import ModuleType

from . import choice
from .digest import METADATA
from .errors import IntegrityError, InvalidLockFile, KernelNotFound, LockFileNotFound, NoVariantFits
from .hub_loader import Resolution, Session, _system, no_fit_message
from .refs import KernelRef, check_repo_id, parse_request, resolve
from .repo_layout import metadata_file, variant_folder
from .settings import Settings, from_environment
from .variants import SystemInfo

LOCK_NAME = "kernels.lock"
FORMAT = 1


@dataclass(frozen=True)
class LockedKernel:
    repo_id: str
    revision: str  # what was asked for (v1, a branch, a tag or the commit itself)
    commit: str
    hub: str | None  # the hub it was locked against; None: the loader's default
    variants: dict[str, str | None] = field(default_factory=dict)  # name -> sha256 of its metadata.json

    def to_json(self) -> dict:
        return {"revision": self.revision, "commit": self.commit, "hub": self.hub, "variants": self.variants}


# -- locking -----------------------------------------------------------------------------------------

def lock_kernel(request: str, *, revision: str | None = None, version: int | None = None, hub: str | None = None,
                settings: Settings | None = None) -> LockedKernel:
    """Resolve `request` (e.g. "org/repo@v1") now and record its commit and variants."""
    ref = parse_request(request, revision, version)
    session = Session(hub, settings or from_environment())
    # Asked now, not from this process's memory: a lock records what the hub says at lock time.
    commit = ref.revision if ref.is_commit else resolve(ref, session.refs(ref.repo_id), session.reader.describe())
    variants: dict[str, str | None] = {}
    for name in session.variants(ref.repo_id, commit):
        try:
            data = session.reader.read_file(ref.repo_id, commit, metadata_file(name))
        except KernelNotFound:  # an old kernel-builder build without metadata
            variants[name] = None
            continue
        variants[name] = hashlib.sha256(data).hexdigest()
    return LockedKernel(ref.repo_id, ref.revision, commit, hub, variants)


def write_lock(path: Path, kernels: list[LockedKernel]) -> None:
    by_repo = {k.repo_id: k.to_json() for k in sorted(kernels, key=lambda k: k.repo_id)}
    data = {"kbuild-lock": FORMAT, "kernels": by_repo}
    Path(path).write_text(json.dumps(data, indent=2, sort_keys=False) + "\n", encoding="utf-8")


def read_lock(path: Path) -> dict[str, LockedKernel]:
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise LockFileNotFound(f"cannot read the lock file {path}: {e.strerror}") from None
    except ValueError as e:
        raise InvalidLockFile(f"{path}: not valid JSON ({e})") from None
    if not isinstance(data, dict) or data.get("kbuild-lock") != FORMAT or not isinstance(data.get("kernels"), dict):
        raise InvalidLockFile(f"{path}: not a kbuild lock file (expected {{\"kbuild-lock\": {FORMAT}, "
                              "\"kernels\": {…}}); write one with `kbuild lock`")
    locked = {}
    for repo_id, entry in data["kernels"].items():
        try:
            locked[check_repo_id(repo_id)] = LockedKernel(repo_id, str(entry["revision"]), _commit(entry["commit"]),
                                                          entry.get("hub"), dict(entry["variants"]))
        except (KeyError, TypeError, ValueError) as e:
            raise InvalidLockFile(f"{path}: the entry for {repo_id!r} is malformed ({e})") from None
    return locked


def _commit(value) -> str:
    ref = KernelRef("x/x", str(value))
    if not ref.is_commit:
        raise ValueError(f"commit {value!r} is not a 40-hex sha")
    return ref.revision


# -- loading -----------------------------------------------------------------------------------------

def load_kernel(repo_id: str, *, lockfile: str | Path | None = None, backend: str | None = None,
                hub: str | None = None, system: SystemInfo | None = None, check_arch: bool = True) -> ModuleType:
    """The locked kernel, from the cache only (fill it with `kbuild download` or get_locked_kernel).
    Without `lockfile`, the kernels.lock nearest above the caller's file (or the working folder).
    `check_arch=False` as for get_kernel."""
    locked = _locked(repo_id, lockfile)
    settings = replace(from_environment(), offline=True)
    return _load(locked, hub, settings, _arch_checked(system or _system(backend), check_arch))


def get_locked_kernel(repo_id: str, *, lockfile: str | Path | None = None, backend: str | None = None,
                      hub: str | None = None, system: SystemInfo | None = None, check_arch: bool = True) -> ModuleType:
    """The locked kernel, downloaded when it is not cached yet. `check_arch=False` as for get_kernel."""
    return _load(_locked(repo_id, lockfile), hub, from_environment(),
                 _arch_checked(system or _system(backend), check_arch))


def _arch_checked(system: SystemInfo, check_arch: bool) -> SystemInfo:
    # without a GPU arch, no variant's recorded archs are held against this GPU (kbuild.fit)
    return system if check_arch else replace(system, gpu_arch=None)


def download_locked(lockfile: str | Path, *, hub: str | None = None, backend: str | None = None,
                    all_variants: bool = False, system: SystemInfo | None = None) -> list[Path]:
    """Fetch and verify, for every kernel of the lock file, the variant that fits this system (or
    every variant); their cache folders."""
    settings = from_environment()
    folders = []
    for locked in read_lock(Path(lockfile)).values():
        session = Session(hub or locked.hub, settings)
        if all_variants:
            names = sorted(locked.variants)
        else:
            names = [_choose(locked, system or _system(backend), session)]
        for name in names:
            folders.append(session.install(locked.repo_id, locked.commit, name, expect=_check_metadata(locked, name)))
    return folders


def _load(locked: LockedKernel, hub: str | None, settings: Settings, system: SystemInfo) -> ModuleType:
    session = Session(hub or locked.hub, settings)
    variant = _choose(locked, system, session)
    # The lock's check runs inside the cache: a copy it refuses is never cached, or is removed.
    return session.load(locked.repo_id, locked.commit, variant, check=_check_metadata(locked, variant))


def _choose(locked: LockedKernel, system: SystemInfo, session: Session) -> str:
    """The locked variant get_kernel would choose: by name, then by its metadata.json (kbuild.fit;
    offline, the cached copy's), before anything of it is imported."""
    found = session.judge_metadata(Resolution(KernelRef(locked.repo_id, locked.revision), locked.commit,
                                              session.reader.describe(), system,
                                              tuple(choice.resolve(list(locked.variants), system))))
    if found.chosen is None:
        raise NoVariantFits(no_fit_message(found, {}).replace("Looked at commit", "Locked to commit"))
    return found.chosen


def _check_metadata(locked: LockedKernel, variant: str):
    def check(folder: Path) -> None:
        expected = locked.variants.get(variant)
        meta = folder / METADATA
        if expected is None:
            return
        actual = hashlib.sha256(meta.read_bytes()).hexdigest() if meta.is_file() else None
        if actual != expected:
            raise IntegrityError(f"{locked.repo_id}@{locked.commit[:12]} {variant_folder(variant)}: metadata.json does "
                                 f"not match the lock file (locked {expected[:12]}, found {(actual or 'none')[:12]}); "
                                 "the copy is not cached")
    return check


def _locked(repo_id: str, lockfile: str | Path | None) -> LockedKernel:
    path = Path(lockfile) if lockfile is not None else find_lockfile(_caller_dir())
    locked = read_lock(path)
    name = repo_id.partition("@")[0]
    if name not in locked:
        raise InvalidLockFile(f"{name} is not in the lock file {path} (it locks: {', '.join(locked) or 'nothing'}); "
                         f"add it to [tool.kbuild.kernels] in pyproject.toml and run `kbuild lock`")
    return locked[name]


def find_lockfile(start: Path) -> Path:
    for folder in (start, *start.parents):
        if (folder / LOCK_NAME).is_file():
            return folder / LOCK_NAME
    raise LockFileNotFound(f"no {LOCK_NAME} in {start} or above it; write one with `kbuild lock`, "
                            "or pass lockfile=")


def _caller_dir() -> Path:
    frame = sys._getframe(3)  # _caller_dir <- _locked <- load_kernel/get_locked_kernel <- the caller
    filename = frame.f_globals.get("__file__")
    return Path(filename).resolve().parent if filename else Path.cwd()
