"""The download cache: one folder per (hub, repo, commit, variant), written atomically under a
file lock, verified before it is first used and cheaply re-checked after.

    $KBUILD_CACHE/kernels/<hub>/<org>/<name>/
        refs.json                  the last refs seen (branch/tag -> commit): the offline fallback
        <commit>/variants.json     the variant names under build/ at that commit (never changes)
        <commit>/<variant>/        the variant's files, exactly as published, and its SSH signature
                                   beside metadata.json (published in signatures/<variant>/:
                                   kbuild/repo_layout.py)
        <commit>/<variant>.verified  what was verified: (size, mtime_ns, ctime_ns, inode, sha256)
                                   of every file, metadata.json included, and an HMAC of that
                                   under this user's key ($XDG_CONFIG_HOME/kbuild/cache.key)
        <commit>/<variant>.lock    held while fetching
        <commit>/<variant>.refused why the last copy fetched or found was refused (for the offline
                                   error: what is not cached, and why); never read as content

A variant folder appears only by renaming a complete, verified temporary folder, and its marker
is written before that rename, so a folder that exists is complete and has its marker. Later
loads compare each file's size, mtime, ctime and inode with the marker (one lstat per file; an
edit that restores size and mtime still moves ctime) and hash only the files that differ. A
changed file, a link, or a marker that is missing or not signed with this user's key (editing the
cache cannot forge one) is never trusted: the copy is re-verified against the hub's metadata.json,
or fetched again, and when the hub cannot be reached the error says what failed verification.

A variant folder holds exactly its verified files (kbuild.cache_contents): any other entry, a
folder, a link, `__pycache__`, a `.pth`, makes the copy doubtful, before import and on every
reuse. A copy refused by a check (a digest, the caller's `expect`, such as a lock file's
metadata.json hash) is removed, so no later load, by any route, finds it; a copy that only cannot
be re-verified now (no marker, hub unreachable) is kept. A fetch that fails a check, or goes over
its size budget (kbuild.budget), leaves nothing behind.
"""

from __future__ import annotations

import errno
import hashlib
import hmac
import json
import os
import re
import shutil
import stat
import sys
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

from .cache_contents import strays
from .digest import METADATA, SIGNATURES, file_digest, git_blob_oid, verify_tree
from .errors import BadHubContent, CacheNotWritable, IntegrityError, KernelError, OversizedDownload
from .hubs.base import RemoteFile
from .metadata import VariantMetadata
from .refs import Refs
from .repo_layout import variant_folder
from .settings import config_file

if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
    import msvcrt
else:
    import fcntl

MARKER_VERSION = 2
_COMMIT = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?\Z")  # sha1 or sha256 object ids
_VARIANT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*\Z")
# The errors of a cache that cannot be written (a read-only mount, another user's folder); a
# full disk and the like are passed on as they are.
_NOT_WRITABLE = (errno.EROFS, errno.EACCES, errno.EPERM)

# A check of a variant folder: raises IntegrityError when the folder is not what the caller
# expects (kbuild.lockfile's: metadata.json's sha256 must be the locked one).
Expect = Callable[[Path], None]


class Unverifiable(IntegrityError):
    """A cached copy that cannot be verified now (no valid marker, and no hub to re-verify it
    against): doubtful, not refused, so it is kept."""


class KernelCache:
    def __init__(self, root: Path):
        self.root = Path(root)

    def repo_dir(self, hub_key: str, repo_id: str) -> Path:
        org, name = repo_id.split("/")
        return self.root / hub_key / org / name

    def commit_dir(self, hub_key: str, repo_id: str, commit: str) -> Path:
        if not _COMMIT.match(commit):  # names from a hub never become paths unchecked
            raise BadHubContent(f"{repo_id}: the hub named {commit!r} as a commit, which is not a hex object id")
        return self.repo_dir(hub_key, repo_id) / commit

    def variant_dir(self, hub_key: str, repo_id: str, commit: str, variant: str) -> Path:
        if not _VARIANT.match(variant):
            raise BadHubContent(f"{repo_id}@{commit[:12]}: refusing the variant folder name {variant!r}")
        return self.commit_dir(hub_key, repo_id, commit) / variant

    # -- small records ---------------------------------------------------------------------------

    def load_refs(self, hub_key: str, repo_id: str) -> Refs | None:
        data = _read_json(self.repo_dir(hub_key, repo_id) / "refs.json")
        return Refs.from_json(data) if isinstance(data, dict) else None

    def save_refs(self, hub_key: str, repo_id: str, refs: Refs) -> None:
        """Best effort: the record is only the offline fallback, and a read-only cache (a
        container image, a shared mount) must still load what it holds."""
        _try_write_json(self.repo_dir(hub_key, repo_id) / "refs.json", refs.to_json())

    def load_variants(self, hub_key: str, repo_id: str, commit: str) -> list[str] | None:
        data = _read_json(self.commit_dir(hub_key, repo_id, commit) / "variants.json")
        return list(data) if isinstance(data, list) else None

    def save_variants(self, hub_key: str, repo_id: str, commit: str, names: list[str]) -> None:
        _try_write_json(self.commit_dir(hub_key, repo_id, commit) / "variants.json", sorted(names))  # a memo

    # -- variant folders -------------------------------------------------------------------------

    def cached(self, hub_key: str, repo_id: str, commit: str, variant: str,
               anchor: Callable[[], bytes] | None = None, expect: Expect | None = None) -> Path | None:
        """The verified variant folder, or None when it is not in the cache. IntegrityError when it
        is there but cannot be trusted; a copy a check refused is removed first (best effort: a
        read-only cache keeps it). `anchor()` returns the hub's metadata.json for the variant:
        what a copy without a valid marker is re-verified against; `expect(folder)` checks more."""
        path = self.variant_dir(hub_key, repo_id, commit, variant)
        if not path.is_dir():
            return None
        try:
            _check_all(path, anchor, expect)
        except Unverifiable:
            raise
        except IntegrityError as e:
            self._discard(path, anchor, expect, e)
            raise
        return path

    def refusal(self, hub_key: str, repo_id: str, commit: str, variant: str) -> str | None:
        """Why the last copy of this variant was refused, when it was (and none was cached since)."""
        data = _read_json(refusal_path(self.variant_dir(hub_key, repo_id, commit, variant)))
        return data.get("reason") if isinstance(data, dict) and isinstance(data.get("reason"), str) else None

    def _discard(self, path: Path, anchor, expect: Expect | None, why: Exception) -> None:
        """Remove a refused copy under its lock, unless another process replaced it meanwhile."""
        try:
            with file_lock(path.with_name(path.name + ".lock")):
                try:
                    _check_all(path, anchor, expect)
                    return  # replaced by a good copy while this process waited
                except IntegrityError:
                    pass
                _remove_variant(path)
                _try_write_json(refusal_path(path), {"reason": str(why)})
        except OSError:  # a read-only cache: the copy stays, and is refused again each time
            pass

    def install(self, hub_key: str, repo_id: str, commit: str, variant: str,
                fetch: Callable[[Path], list[RemoteFile]], require_digest: bool = True,
                anchor: Callable[[], bytes] | None = None, expect: Expect | None = None) -> Path:
        """The variant folder, fetched with `fetch(tmp)` and verified when it is not cached yet, or
        when the cached copy fails verification or `expect` (it is replaced). One process
        fetches; others that want it at the same time wait on the lock and reuse it."""
        path = self.variant_dir(hub_key, repo_id, commit, variant)
        with self._writing(f"{repo_id}@{commit[:12]} {variant_folder(variant)}"):
            path.parent.mkdir(parents=True, exist_ok=True)
            with file_lock(path.with_name(variant + ".lock")):
                return self._install_locked(path, repo_id, commit, variant, fetch, require_digest, anchor, expect)

    def _install_locked(self, path: Path, repo_id: str, commit: str, variant: str, fetch, require_digest: bool,
                        anchor, expect: Expect | None) -> Path:
        doubtful, keep = None, False
        if path.is_dir():  # another process finished while this one waited, or a doubtful copy
            try:
                _check_all(path, anchor, expect)
                return path
            except IntegrityError as e:
                keep = isinstance(e, Unverifiable)  # restored if no good copy replaces it
                doubtful = path.with_name(f".doubtful-{variant}-{os.getpid()}-{os.urandom(4).hex()}")
                os.replace(path, doubtful)
        tmp = path.with_name(f".tmp-{variant}-{os.getpid()}-{os.urandom(4).hex()}")
        try:
            tmp.mkdir()
            listed = fetch(tmp)
            where = f"{repo_id}@{commit[:12]} {variant_folder(variant)}"
            marker = verify_fetched(tmp, listed, where=where, require_digest=require_digest)
            if expect is not None:  # refused before it is ever in the cache
                expect(tmp)
            _write_json(marker_path(path), _sign(path, marker))
            os.replace(tmp, path)
            refusal_path(path).unlink(missing_ok=True)
        except (IntegrityError, OversizedDownload) as e:  # refused by a check: recorded, nothing kept
            _try_write_json(refusal_path(path), {"reason": str(e)})
            raise
        finally:
            if keep and doubtful is not None and not path.exists():
                os.replace(doubtful, path)  # nothing better came: the unverified copy stays
            for leftover in (tmp, doubtful):  # a failed fetch or verification leaves nothing behind
                if leftover is not None and leftover.exists():
                    shutil.rmtree(leftover, ignore_errors=True)
        return path

    @contextmanager
    def _writing(self, what: str):
        """A cache that cannot be written, said as such: where it is and what to do."""
        try:
            yield
        except KernelError:
            raise
        except OSError as e:
            if e.errno not in _NOT_WRITABLE:
                raise
            raise CacheNotWritable(
                f"{what} is not in the kernel cache, and the cache cannot be written ({e.strerror}: "
                f"{e.filename or self.root}): set KBUILD_CACHE to a writable folder (kernels go to its kernels/), "
                f"or fill {self.root} where it can be written (get_kernel or `kbuild download`)") from None


def marker_path(variant_dir: Path) -> Path:
    return variant_dir.with_name(variant_dir.name + ".verified")


def refusal_path(variant_dir: Path) -> Path:
    return variant_dir.with_name(variant_dir.name + ".refused")


def _remove_variant(path: Path) -> None:
    """The folder out of its place first (a reader sees it whole or not at all), then its marker."""
    aside = path.with_name(f".refused-{path.name}-{os.getpid()}-{os.urandom(4).hex()}")
    os.replace(path, aside)
    shutil.rmtree(aside, ignore_errors=True)
    marker_path(path).unlink(missing_ok=True)


def _check_all(path: Path, anchor, expect: Expect | None) -> None:
    check(path, anchor)
    if expect is not None:
        expect(path)


def no_digest_message(where: str) -> str:
    return (f"{where}: its metadata.json records no digest, so its files cannot be checked against what was "
            "built; pass allow_no_digest=True to load it anyway (its files are then checked only against the "
            "hub's blob ids)")


def verify_fetched(folder: Path, listed: list[RemoteFile], where: str, require_digest: bool = True) -> dict:
    """Check freshly fetched files: the set against the hub's listing, metadata.json's digest for
    the files it covers (hashed once, here), the hub's blob ids for the others (metadata.json
    itself, or every file of a build without a digest); the marker that records them."""
    expected = {f.path for f in listed}  # metadata.json included
    odd = strays(folder, expected)
    if odd:
        raise IntegrityError(f"{where}: the files fetched differ from the hub's listing "
                             f"({', '.join(f'{rel} {how}' for rel, how in odd[:5])})")
    meta = VariantMetadata.for_variant(folder)  # a malformed metadata.json is refused here
    if meta.digest is None and require_digest:
        raise IntegrityError(no_digest_message(where))
    digest = meta.digest or {}
    for f in listed:
        if f.path in digest:
            continue
        if f.lfs_sha256 is not None:
            if _sha256_hex(folder / f.path) != f.lfs_sha256:
                raise IntegrityError(f"{where}: {f.path} does not match the hub's LFS sha256 {f.lfs_sha256[:12]}")
        elif git_blob_oid(folder / f.path) != f.oid:
            raise IntegrityError(f"{where}: {f.path} does not match the hub's blob id {f.oid[:12]}")
    if meta.digest is not None:
        verify_tree(folder, meta.digest)
    return _marker(folder, expected, digest)


def check(variant_dir: Path, anchor: Callable[[], bytes] | None = None) -> None:
    """Raise IntegrityError when a cached variant cannot be trusted. Cheap when it can: one lstat
    per file, no hashing, when this user's signed marker matches."""
    marker = _read_json(marker_path(variant_dir))
    if not _signed(variant_dir, marker):
        _reverify(variant_dir, anchor)
        return
    recorded = marker["files"]
    present = set(recorded)
    _require_exactly(variant_dir, present)
    stale = False
    for rel in sorted(present):
        entry = recorded[rel]
        if not isinstance(entry, list) or len(entry) != 5:
            _changed(variant_dir, "the verification record", "is malformed")
        if _stat(variant_dir / rel) == entry[:4]:
            continue
        if file_digest(variant_dir / rel) != entry[4]:
            _changed(variant_dir, rel)
        stale = True  # same bytes, new mtime (touched or copied): record it so the next check is cheap
    if stale:
        _try_write_marker(variant_dir, _marker(variant_dir, present, {r: recorded[r][4] for r in present}))


def _reverify(variant_dir: Path, anchor: Callable[[], bytes] | None) -> None:
    """No trustworthy marker (an older cache, a removed or edited marker, another user's key):
    metadata.json must be the hub's, and every file must match its digest; then a new marker.
    A variant without a digest cannot be checked this way and is refused."""
    meta = VariantMetadata.for_variant(variant_dir)
    if meta.digest is None:
        raise Unverifiable(f"kernel variant {variant_dir}: its verification record is missing and its "
                           f"metadata.json has no digest to check it with; delete {variant_dir} to fetch it again")
    # the signatures published with it are outside the digest; a signature check reads them on its own
    expected = set(meta.digest) | {METADATA} | {s for s in SIGNATURES if (variant_dir / s).is_file()}
    _require_exactly(variant_dir, expected)  # a planted entry is refused whatever the hub says
    if anchor is None:
        raise Unverifiable(f"kernel variant {variant_dir}: its verification record is missing or not signed by "
                           "this user, and nothing to re-verify it against was given")
    try:
        published = anchor()
    except OSError as e:  # unreachable, offline: nothing to re-verify against
        raise Unverifiable(f"kernel variant {variant_dir}: its verification record is missing or not signed by "
                           f"this user, and re-verifying it needs the hub: {e}") from None
    if (variant_dir / METADATA).read_bytes() != published:
        _changed(variant_dir, METADATA, "does not match the hub's copy")
    verify_tree(variant_dir, meta.digest)
    _try_write_marker(variant_dir, _marker(variant_dir, expected, meta.digest))


def _marker(folder: Path, files: set[str], known: dict[str, str] | None = None) -> dict:
    """`known`: digests just verified, not hashed again. metadata.json is one of the files: its
    recorded hash binds the digest the others were checked with."""
    known = known or {}
    entries = {rel: [*_stat(folder / rel), known.get(rel) or file_digest(folder / rel)] for rel in sorted(files)}
    return {"version": MARKER_VERSION, "files": entries}


def _sign(variant_dir: Path, marker: dict) -> dict:
    """The marker with this user's HMAC for the variant's final place (not a temporary folder's)."""
    key = signing_key()
    return {**marker, "mac": _mac(key, variant_dir, marker["files"])} if key is not None else marker


def _mac(key: bytes, folder: Path, entries: dict) -> str:
    # The variant's place in the cache (hub/org/name/commit/variant) is signed too: a marker
    # copied from another variant does not verify.
    where = "/".join(folder.parts[-5:])
    text = json.dumps({"where": where, "files": entries}, sort_keys=True, separators=(",", ":"))
    return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()


def _signed(folder: Path, marker) -> bool:
    key = signing_key()
    if key is None or not isinstance(marker, dict) or marker.get("version") != MARKER_VERSION:
        return False
    files, mac = marker.get("files"), marker.get("mac")
    return isinstance(files, dict) and isinstance(mac, str) and hmac.compare_digest(_mac(key, folder, files), mac)


def signing_key_path() -> Path:
    return config_file().parent / "cache.key"


_KEYS: dict[Path, bytes] = {}  # read once per process: a load checks a marker without opening the key


def signing_key() -> bytes | None:
    """This user's key for signing verification records, made once (0600, never through a link);
    None when it cannot be read or made (then every load re-verifies against the hub)."""
    path = signing_key_path()
    if path in _KEYS:
        return _KEYS[path]
    key = _load_key(path)
    if key is not None:
        _KEYS[path] = key
    return key


def _load_key(path: Path) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(os.urandom(32).hex())
        except FileExistsError:  # another process made it first
            pass
        except OSError:
            return None
        return _load_key(path)
    except OSError:
        return None
    with os.fdopen(fd) as f:
        key = f.read().strip()
    return key.encode() if len(key) == 64 else None


def _try_write_marker(variant_dir: Path, marker: dict) -> None:
    # a read-only cache: verified all the same, just not cheaper next time
    _try_write_json(marker_path(variant_dir), _sign(variant_dir, marker))


def _require_exactly(variant_dir: Path, files: set[str]) -> None:
    """IntegrityError naming the first entry that is not one of `files` as a regular file, or the
    first of them that is missing (kbuild.cache_contents)."""
    odd = strays(variant_dir, files)
    if odd:
        _changed(variant_dir, *odd[0])


def _changed(variant_dir: Path, rel: str, how: str = "was changed") -> None:
    raise IntegrityError(f"kernel variant {variant_dir}: {rel} {how} after it was downloaded and verified")


def _stat(path: Path) -> list[int]:
    st = path.lstat()
    if not stat.S_ISREG(st.st_mode):  # a fetch only ever writes regular files
        raise IntegrityError(f"kernel variant file {path} is no longer a regular file (a link?) after it was "
                             "downloaded and verified")
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


def _sha256_hex(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _read_json(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _write_json(path: Path, data) -> None:
    """Atomically: a reader sees the old file or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{os.urandom(4).hex()}")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True), encoding="utf-8")
    os.replace(tmp, path)


def _try_write_json(path: Path, data) -> None:
    try:
        _write_json(path, data)
    except OSError:
        pass


@contextmanager
def file_lock(path: Path):
    """An exclusive lock between processes (fcntl on POSIX, msvcrt on Windows); blocks until held."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as f:
        if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
            f.seek(0)
            while True:
                try:
                    msvcrt.locking(f.fileno(), msvcrt.LK_LOCK, 1)
                    break
                except OSError:
                    continue
            try:
                yield
            finally:
                f.seek(0)
                msvcrt.locking(f.fileno(), msvcrt.LK_UNLCK, 1)
        else:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f.fileno(), fcntl.LOCK_UN)
