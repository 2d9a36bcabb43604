"""`get_kernel("org/repo@v1")`: resolve the ref to a commit, choose the variant that fits, fetch
only it into the cache, verify it, import it (docs/formats.md, "Hub repository layout").

Requests: a commit-pinned load that is cached makes none; a branch load makes one (the refs) per
process, and falls back to the last refs it saw, with a warning, when the hub cannot be reached;
offline (`KBUILD_OFFLINE=1` / `HF_HUB_OFFLINE=1`) an HTTP hub is never asked. Within a process,
a ref resolves once and a (hub, repo, commit, variant) imports once.
"""

from __future__ import annotations

import json
import re
import sys
import threading
import warnings
from dataclasses import dataclass, replace
from pathlib import Path
from types import FrameType, ModuleType
from typing import NoReturn

from . import choice, fit, hubs
from .cache import Expect, KernelCache, Unverifiable, no_digest_message
from .choice import Candidate, format_trace
from .errors import (
    HubUnreachable,
    IntegrityError,
    InvalidMetadata,
    KernelNotFound,
    MissingPin,
    NoVariantFits,
    OfflineMiss,
    RepoNotFound,
    RevisionNotFound,
    SignatureRefused,
)
from .gpu_arch import describe_device
from .kernel_deps import KernelPin, LoadOne
from .loading import find_variant, load_variant
from .metadata import VariantMetadata
from .refs import KernelRef, Refs, parse_request, resolve
from .repo_layout import metadata_file, variant_folder
from .settings import Settings, from_environment
from .signatures import check as signature
from .trust import check_trust
from .variants import SystemInfo, detect_system

_MEMO_LOCK = threading.Lock()
_LOADED: dict[tuple, ModuleType] = {}  # (hub, repo, commit, variant) -> module
_RESOLVED: dict[tuple, str] = {}  # (hub, repo, revision) -> commit
_VARIANTS: dict[tuple, list[str]] = {}  # (hub, repo, commit) -> variant names
_SYSTEMS: dict[str | None, SystemInfo] = {}
# (hub, repo, commit, variant) -> its metadata.json, read for the checks of kbuild.fit
_METADATA: dict[tuple, VariantMetadata] = {}


@dataclass(frozen=True)
class Resolution:
    """What a request resolved to on one hub: the commit and every variant judged."""

    ref: KernelRef
    commit: str
    hub: str
    system: SystemInfo
    trace: tuple[Candidate, ...]

    @property
    def best(self) -> Candidate | None:
        """The fitting candidate a load takes (its name parsed once, in the trace)."""
        return self.trace[0] if self.trace and self.trace[0].accepted else None

    @property
    def chosen(self) -> str | None:
        return self.best.name if self.best else None


# -- the public functions ------------------------------------------------------------------------

def get_kernel(repo_id: str, *, revision: str | None = None, version: int | None = None, hub: str | None = None,
               backend: str | None = None, trust_remote_code: bool | list[str] = False,
               system: SystemInfo | None = None, allow_no_digest: bool = False, check_arch: bool = True,
               require_signature: bool | None = None) -> ModuleType:
    """Import the variant of `repo_id` that fits this system.

    Pin exactly once: `"org/repo@v1"` (or `version=1`) for a version branch, `"org/repo@<sha>"` or
    `revision=` for a branch, tag or commit. `hub` is a folder / file:// URL (a local git hub) or an
    http(s):// URL; by default `$KBUILD_HUB`, else `$HF_ENDPOINT`, else ~/.cache/kbuild/hub.
    `backend="cpu"` picks CPU builds in a CUDA torch; `system` overrides detection altogether.
    A variant whose metadata.json records no digest (older kernel-builder builds) is refused
    unless `allow_no_digest=True`: its files are then checked only against the hub's blob ids.
    A CUDA or ROCm variant whose recorded archs do not run on this GPU is skipped, unless
    `check_arch=False` (a kernel may cover other GPUs through, say, a Triton fallback).
    `require_signature=True` loads only a variant a signer its organisation trusts signed (False: no
    such check); None: as KBUILD_REQUIRE_SIGNATURE or the signatures file say (kbuild/signatures/rules.py).
    """
    settings = from_environment()
    ref = _request(repo_id, revision, version, hub, settings)
    target = _target(system, backend, check_arch)

    def dependency(pin: KernelPin) -> ModuleType:  # from the same hub, for the same system, trusted alike
        return get_kernel(pin.repo_id, version=pin.version, revision=pin.revision, hub=hub, backend=backend,
                          trust_remote_code=trust_remote_code, system=target, allow_no_digest=allow_no_digest,
                          require_signature=require_signature)

    if ref.repo_id in settings.local_kernels:
        folder = find_variant(settings.local_kernels[ref.repo_id], target)
        # a local build stands in for the hub's, not for the rule: it loads signed or not at all
        rule, signers = signature_rule(settings, ref.repo_id, require_signature)
        if rule.required:
            signature.requirement_check(signers, rule, f"{ref.repo_id} from LOCAL_KERNELS ({folder})")(folder)
        return load_variant(folder, load_dependency=dependency, owner=ref.repo_id)
    session = Session(hub, settings, allow_no_digest, require_signature)
    check_trust(ref.repo_id, session.reader.endpoint, trust_remote_code, settings)
    return session.load_best(session.resolve(ref, target), dependency)[1]


def install_kernel(repo_id: str, *, revision: str | None = None, version: int | None = None, hub: str | None = None,
                   backend: str | None = None, variant: str | None = None, system: SystemInfo | None = None,
                   allow_no_digest: bool = False, check_arch: bool = True,
                   require_signature: bool | None = None) -> Path:
    """Download and verify the variant that fits (or `variant`, by name) without importing it; its
    folder. `allow_no_digest`, `check_arch` and `require_signature` as for get_kernel."""
    settings = from_environment()
    ref = _request(repo_id, revision, version, hub, settings)
    session = Session(hub, settings, allow_no_digest, require_signature)
    found = session.resolve(ref, _target(system, backend, check_arch))
    if variant is None:
        return session.install_best(found)[1]
    if variant not in {c.name for c in found.trace}:
        raise KernelNotFound(f"{ref} (commit {found.commit[:12]}) has no variant {variant!r}; it has: "
                             f"{', '.join(c.name for c in found.trace) or 'none'}")
    return session.install(ref.repo_id, found.commit, variant)


def has_kernel(repo_id: str, *, revision: str | None = None, version: int | None = None, hub: str | None = None,
               backend: str | None = None, system: SystemInfo | None = None, check_arch: bool = True) -> bool:
    """Whether the repo has, at that pin, a variant that fits this system, as get_kernel judges
    (only the candidates' metadata.json is read)."""
    settings = from_environment()
    try:
        ref = _request(repo_id, revision, version, hub, settings)
    except RepoNotFound:
        return False
    target = _target(system, backend, check_arch)
    if ref.repo_id in settings.local_kernels:
        try:
            find_variant(settings.local_kernels[ref.repo_id], target)
        except KernelNotFound:
            return False
        return True
    try:
        session = Session(hub, settings)
        return session.judge_metadata(session.resolve(ref, target)).chosen is not None
    except (RepoNotFound, RevisionNotFound, OfflineMiss):
        return False


def get_kernel_variants(repo_id: str, *, revision: str | None = None, version: int | None = None,
                        hub: str | None = None, backend: str | None = None,
                        system: SystemInfo | None = None, check_arch: bool = True) -> list[Candidate]:
    """Every variant at that pin, judged against this system: the accepted ones best-first, then
    the rejected ones with the reason (kbuild.choice.format_trace renders them). Each variant's
    metadata.json is read and judged as get_kernel would: its ABI floor against this host, its GPU
    archs against this GPU, its python-depends against this environment (kbuild.fit)."""
    settings = from_environment()
    ref = _request(repo_id, revision, version, hub, settings)
    session = Session(hub, settings)
    return list(session.judge_metadata(session.resolve(ref, _target(system, backend, check_arch)), every=True).trace)


def resolve_kernel(repo_id: str, *, revision: str | None = None, version: int | None = None, hub: str | None = None,
                   backend: str | None = None, system: SystemInfo | None = None,
                   check_arch: bool = True) -> Resolution:
    """The commit and variant choice a get_kernel call would make, without fetching more than the
    candidates' metadata.json (judged by kbuild.fit)."""
    settings = from_environment()
    ref = _request(repo_id, revision, version, hub, settings)
    session = Session(hub, settings)
    return session.judge_metadata(session.resolve(ref, _target(system, backend, check_arch)))


def _request(repo_id: str, revision: str | None, version: int | None, hub, settings: Settings) -> KernelRef:
    """The pinned request; one without a pin says, instead, that the hub has no such repo when it
    has none, and lists the versions to pin when it has (looked up only on that error path)."""
    try:
        return parse_request(repo_id, revision, version)
    except MissingPin as e:
        if e.repo_id in settings.local_kernels:
            raise
        try:
            refs = Session(hub, settings).refs(e.repo_id)
        except RepoNotFound as missing:
            raise missing from None
        except (OSError, ValueError):  # offline or unreachable: the missing pin is still the news
            raise e from None
        versions = sorted((b for b in refs.branches if re.fullmatch(r"v\d+", b)), key=lambda b: int(b[1:]))
        if versions:
            raise MissingPin(e.repo_id, f"{e} Versions there: {', '.join(versions)}.") from None
        raise


# -- one call's view of a hub and the cache -----------------------------------------------------

class Session:
    def __init__(self, hub: str | hubs.HubReader | None, settings: Settings, allow_no_digest: bool = False,
                 require_signature: bool | None = None):
        self.settings = settings
        self.allow_no_digest = allow_no_digest
        self.require_signature = require_signature  # the argument; the settings' rule applies when None
        self.reader = _reader(hub, settings)
        self.cache = KernelCache(settings.kernels_cache)
        self.offline = settings.offline and not self.reader.local

    def resolve(self, ref: KernelRef, system: SystemInfo) -> Resolution:
        commit = self.commit(ref)
        names = self.variants(ref.repo_id, commit)
        return Resolution(ref, commit, self.reader.describe(), system, tuple(choice.resolve(names, system)))

    def commit(self, ref: KernelRef) -> str:
        if ref.is_commit:
            return ref.revision
        key = (self.reader.key, ref.repo_id, ref.revision)
        commit = _RESOLVED.get(key)
        if commit is None:
            commit = resolve(ref, self.refs(ref.repo_id), self.reader.describe())
            with _MEMO_LOCK:
                _RESOLVED[key] = commit
        return commit

    def refs(self, repo_id: str) -> Refs:
        """The hub's refs (recorded for later), or the recorded ones when offline or unreachable."""
        if not self.offline:
            try:
                refs = self.reader.refs(repo_id)
            except HubUnreachable as e:
                cached = self.cache.load_refs(self.reader.key, repo_id)
                if cached is None:
                    raise
                _warn(f"{e}; using the refs of {repo_id} recorded when it was last reached")
                return cached
            self.cache.save_refs(self.reader.key, repo_id, refs)
            return refs
        cached = self.cache.load_refs(self.reader.key, repo_id)
        if cached is None:
            raise OfflineMiss(f"{repo_id} was never resolved on {self.reader.describe()}, and offline mode is on "
                              "(KBUILD_OFFLINE / HF_HUB_OFFLINE); load it once online or run `kbuild download`")
        return cached

    def variants(self, repo_id: str, commit: str) -> list[str]:
        key = (self.reader.key, repo_id, commit)
        names = _VARIANTS.get(key)
        if names is None:
            names = self.cache.load_variants(*key)
        if names is None:
            if self.offline:
                raise OfflineMiss(f"{repo_id}@{commit[:12]} is not in the cache and offline mode is on "
                                  "(KBUILD_OFFLINE / HF_HUB_OFFLINE); load it once online or run `kbuild download`")
            try:
                names = self.reader.variants(repo_id, commit)
            except HubUnreachable as e:
                self._say_cache_doubts(repo_id, commit, e)
                raise
            self.cache.save_variants(*key, names)
        with _MEMO_LOCK:
            _VARIANTS[key] = names
        return names

    def metadata(self, repo_id: str, commit: str, variant: str) -> VariantMetadata | None:
        """The variant's metadata.json on the hub: one small file, nothing else fetched (an empty
        record for an old kernel-builder build without one). Offline, or when the hub cannot be
        reached, the cached copy's, which is what get_kernel would load then; None (unknown, not
        checked here) when there is no trustworthy copy either."""
        key = (self.reader.key, repo_id, commit, variant)
        if key in _METADATA:
            return _METADATA[key]
        if self.offline:
            return self._cached_metadata(repo_id, commit, variant)
        try:
            raw = self.reader.read_file(repo_id, commit, metadata_file(variant))
        except KernelNotFound:  # an old kernel-builder build without metadata.json: nothing recorded
            raw = b"{}"
        except HubUnreachable:
            return self._cached_metadata(repo_id, commit, variant)
        where = f"{repo_id}@{commit[:12]}/{metadata_file(variant)}"  # errors name the hub's file
        meta = VariantMetadata.from_dict(_json(raw, where), Path(where))
        with _MEMO_LOCK:
            _METADATA[key] = meta
        return meta

    def floor(self, repo_id: str, commit: str, variant: str):
        """The variant's recorded ABI floor (an AbiFloor), None when it records none or is unknown."""
        meta = self.metadata(repo_id, commit, variant)
        return meta.abi if meta is not None else None

    def _cached_metadata(self, repo_id: str, commit: str, variant: str) -> VariantMetadata | None:
        try:  # no anchor: only a copy this user's signed marker vouches for is read
            folder = self.cache.cached(self.reader.key, repo_id, commit, variant)
        except IntegrityError:
            return None
        return VariantMetadata.for_variant(folder) if folder is not None else None

    def judge_metadata(self, found: Resolution, every: bool = False) -> Resolution:
        """`found` with each accepted variant judged by its metadata.json (kbuild.fit: ABI floor,
        GPU archs, python-depends), best first, until one fits (`every`: all of them): the
        choice get_kernel makes."""
        trace = list(found.trace)
        for candidate in [c for c in found.trace if c.accepted]:
            verdict = fit.judge(candidate.variant, found.system,
                                self.metadata(found.ref.repo_id, found.commit, candidate.name))
            trace = choice.apply(trace, candidate.name, verdict)
            if verdict.reason is None and not every:
                break
        return replace(found, trace=tuple(trace))

    def install(self, repo_id: str, commit: str, variant: str, expect: Expect | None = None) -> Path:
        """The verified variant folder: the cached copy when it verifies, else fetched (again).
        `expect(folder)` is one more check (a lock file's): a cached copy that fails it is removed
        and fetched again, a fetched one that fails it never enters the cache. The organisation's
        require-signature rule is such a check too (kbuild/signatures/check.py), except that a cached copy it
        refuses is removed and not fetched again: the hub holds the very same files at that commit."""
        expect = self._with_signature_rule(repo_id, commit, variant, expect)

        def anchor() -> bytes:  # the hub's metadata.json: what a copy without a valid marker must match
            if self.offline:
                raise OfflineMiss("offline mode is on (KBUILD_OFFLINE / HF_HUB_OFFLINE)")
            return self.reader.read_file(repo_id, commit, metadata_file(variant))

        where = f"{repo_id}@{commit[:12]} {variant_folder(variant)}"
        try:
            cached = self.cache.cached(self.reader.key, repo_id, commit, variant, anchor, expect)
            doubt = None
        except SignatureRefused as e:  # the commit's files are what the hub holds: fetching them again cannot help
            raise SignatureRefused(f"{e}; {self._fate(e, repo_id, commit, variant)}") from None
        except IntegrityError as e:
            cached, doubt = None, e
        # a copy refused a moment ago (reading its metadata.json with the hub down) or by an earlier
        # process, and not fetched since: a fetch that fails must say that first
        refused = self.cache.refusal(self.reader.key, repo_id, commit, variant) \
            if cached is None and doubt is None and not self.offline else None
        if cached is not None:
            if not self.allow_no_digest and VariantMetadata.for_variant(cached).digest is None:
                raise IntegrityError(no_digest_message(where))
            return cached
        if self.offline:
            if doubt is not None:
                raise IntegrityError(f"{doubt}; offline mode is on, so it cannot be fetched again") from None
            refused = self.cache.refusal(self.reader.key, repo_id, commit, variant)
            if refused is not None:  # say why it is not there: its last copy was refused
                raise IntegrityError(f"{where} is not in the cache: the last copy of it was refused ({refused}); "
                                     "offline mode is on, so it cannot be fetched again")
            raise OfflineMiss(f"{where} is not in the cache and offline mode is on "
                              "(KBUILD_OFFLINE / HF_HUB_OFFLINE); load it once online or run `kbuild download`")
        try:
            cap = self.settings.max_variant_bytes
            path = self.cache.install(self.reader.key, repo_id, commit, variant,
                                      lambda dest: self.reader.fetch(repo_id, commit, variant, dest, cap),
                                      require_digest=not self.allow_no_digest, anchor=anchor, expect=expect)
        except (OSError, IntegrityError) as e:
            if doubt is None and refused is None or isinstance(e, SignatureRefused):
                raise  # a signature refusal is the whole story: the hub's copy is the one refused
            first = doubt or IntegrityError(f"{where}: the last copy of it was refused ({refused})")
            raise IntegrityError(self._refetch_failed(first, e, self._fate(doubt, repo_id, commit, variant))) from None
        if doubt is not None:
            _warn(f"{doubt}; fetched it again from {self.reader.describe()}")
        return path

    def signature_rule(self, repo_id: str):
        return signature_rule(self.settings, repo_id, self.require_signature)

    def _with_signature_rule(self, repo_id: str, commit: str, variant: str, expect: Expect | None) -> Expect | None:
        rule, signers = self.signature_rule(repo_id)
        if not rule.required:
            return expect  # without the rule nothing changes
        signed = signature.requirement_check(signers, rule, f"{repo_id}@{commit[:12]} {variant_folder(variant)}")
        if expect is None:
            return signed

        def both(folder: Path) -> None:
            expect(folder)
            signed(folder)
        return both

    def _say_cache_doubts(self, repo_id: str, commit: str, error: Exception) -> None:
        """The hub cannot list a commit this cache holds variants of: when one of those copies fails
        its check, that is what the user must hear first (an IntegrityError, not the hub's error)."""
        folder = self.cache.commit_dir(self.reader.key, repo_id, commit)
        names = sorted(p.name for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")) \
            if folder.is_dir() else []
        for name in names:
            try:
                self.cache.cached(self.reader.key, repo_id, commit, name)
            except Unverifiable:
                continue  # not found wrong: only uncheckable without the hub, whose error says enough
            except IntegrityError as doubt:
                raise IntegrityError(self._refetch_failed(doubt, error, self._fate(doubt, repo_id, commit, name))) \
                    from None

    def _fate(self, doubt: Exception | None, repo_id: str, commit: str, variant: str) -> str:
        """What became of the cached copy that `doubt` refused, for the message."""
        if doubt is None:
            return "nothing of it is cached"
        if isinstance(doubt, Unverifiable):
            return "that cached copy is kept (it could not be checked without the hub, not found wrong)"
        if self.cache.variant_dir(self.reader.key, repo_id, commit, variant).exists():
            return "that cached copy could not be removed (a read-only cache) and is refused each time"
        return "that cached copy was removed (what it held cannot be trusted)"

    def _refetch_failed(self, doubt: Exception, error: Exception, fate: str) -> str:
        """The cache's refusal first, then what a fresh copy needs and how to get one."""
        return (f"{doubt}; {fate}. A fresh copy must come from "
                f"{self.reader.describe()}, and fetching it failed: {error}. Reach that hub again (or pass hub= / set "
                f"KBUILD_HUB to one that has it), or set KBUILD_CACHE to a cache that holds a verified copy (this one: "
                f"{self.cache.root}); offline mode (KBUILD_OFFLINE) cannot help, nothing verified of it is left here")

    def install_best(self, found: Resolution) -> tuple[str, Path]:
        """The best variant whose installed metadata.json passes kbuild.fit's checks (ABI floor,
        GPU archs, python-depends), installed: (name, folder). One that fails is rejected in the
        trace, before anything of it is loaded."""
        while True:
            best = found.best or self.raise_no_fit(found)
            folder = self.install(found.ref.repo_id, found.commit, best.name)
            meta = VariantMetadata.for_variant(folder)
            with _MEMO_LOCK:
                _METADATA[(self.reader.key, found.ref.repo_id, found.commit, best.name)] = meta
            verdict = fit.judge(best.variant, found.system, meta)
            if verdict.reason is None:
                return best.name, folder
            found = replace(found, trace=tuple(choice.apply(list(found.trace), best.name, verdict)))

    def load_best(self, found: Resolution, dependency: LoadOne | None = None) -> tuple[str, ModuleType]:
        """The best variant that install_best accepts, imported: (its name, its module). Its name is
        found.chosen unless install_best rejected that one by its metadata and took the next."""
        # under a signature rule the cached copy is checked again (an import made without the rule proves nothing)
        if not self.signature_rule(found.ref.repo_id)[0].required:
            before = self._loaded_before(found)
            if before is not None:
                return before
        variant, folder = self.install_best(found)
        return variant, self.load(found.ref.repo_id, found.commit, variant, folder=folder, dependency=dependency)

    def _loaded_before(self, found: Resolution) -> tuple[str, ModuleType] | None:
        """What install_best would take, when this process has judged it already: the accepted
        candidates in order, each by the metadata read then, passing over those it rejects (not
        fetched or checked again), to the first that fits this system; its module if loaded."""
        for candidate in (c for c in found.trace if c.accepted):
            key = (self.reader.key, found.ref.repo_id, found.commit, candidate.name)
            meta = _METADATA.get(key)
            if meta is None:
                return None  # not judged in this process: install_best reads it
            if fit.judge(candidate.variant, found.system, meta).reason is None:
                module = _LOADED.get(key)
                return (candidate.name, module) if module is not None else None
        return None

    def load(self, repo_id: str, commit: str, variant: str, check=None, folder: Path | None = None,
             dependency: LoadOne | None = None) -> ModuleType:
        """Import a variant (fetched and verified first when needed), once per process;
        `check(folder)` runs before the first import (the lock file's metadata check); `folder`:
        the variant already installed; `dependency` loads its kernel dependencies."""
        key = (self.reader.key, repo_id, commit, variant)
        module = _LOADED.get(key)
        if module is None:
            if folder is None:
                folder = self.install(repo_id, commit, variant, expect=check)
            elif check is not None:
                check(folder)
            # verified by install (digest or marker); the same build reached through another
            # commit (republished to another branch) is the module already loaded
            module = same_build_loaded(folder) or load_variant(folder, verify=False, load_dependency=dependency,
                                                               owner=repo_id, origin=(repo_id, commit))
            with _MEMO_LOCK:
                _LOADED[key] = module
        return module

    def raise_no_fit(self, found: Resolution) -> NoReturn:
        raise NoVariantFits(no_fit_message(found, self.fitting_versions(found)))

    def fitting_versions(self, found: Resolution) -> dict[int, str]:
        """Other v<N> branches with a variant that fits (version -> variant); best effort."""
        try:
            refs = self.refs(found.ref.repo_id)
        except (OSError, ValueError):
            return {}
        fits = {}
        for version, commit in refs.versions().items():
            if commit == found.commit:
                continue
            try:
                other = Resolution(found.ref, commit, found.hub, found.system,
                                   tuple(choice.resolve(self.variants(found.ref.repo_id, commit), found.system)))
                best = self.judge_metadata(other).chosen  # as get_kernel would judge it there
            except (OSError, ValueError):
                continue
            if best is not None:
                fits[version] = best
        return fits


def _reader(hub: str | Path | hubs.HubReader | None, settings: Settings) -> hubs.HubReader:
    """The reader a Session reads through: `hub` itself when it is one, else the one its address
    (or the settings' hub) names."""
    if hub is None or isinstance(hub, (str, Path)):
        return hubs.open(hub or settings.hub, settings.token)
    return hub


def signature_rule(settings: Settings, repo_id: str, require_signature: bool | None):
    """The require-signature rule for the repo's organisation: (Requirement, its trusted signers)."""
    org = repo_id.split("/")[0]
    return settings.signatures.requirement(org, require_signature), settings.signatures.signers(org)


def no_fit_message(found: Resolution, other_versions: dict[int, str]) -> str:
    system = found.system
    fitting = system.fitting_build()  # a CPU build where torch has a GPU backend but no GPU here
    own = f"{fitting.name}, or torch-{fitting.backend} for a Python-only kernel"
    head = (f"no variant of {found.ref} fits this system ({system.describe()}; its variant would be {own}). "
            f"Looked at commit {found.commit[:12]} on {found.hub}")
    if not found.trace:
        body = f"; {found.ref.revision} has no build/ folder: nothing was published there."
    else:
        body = f"; the variants there:\n{format_trace(list(found.trace))}"
    if other_versions:
        hints = "; ".join(f'v{v} has {name} (get_kernel("{found.ref.repo_id}@v{v}"))'
                          for v, name in sorted(other_versions.items()))
        return f"{head}{body}\nAnother version fits: {hints}"
    gpu = f" ({describe_device(system.backend, system.gpu_arch)})" if system.gpu_arch else ""
    return f"{head}{body}\nNo other version of {found.ref.repo_id} fits either; ask its publisher for a build " \
           f"for {fitting.name}{gpu}."


def same_build_loaded(folder: Path) -> ModuleType | None:
    """The module already imported under this build's id from another folder with the very same
    files (equal digests), else None."""
    meta = VariantMetadata.for_variant(folder)
    module = sys.modules.get(meta.id) if meta.id and meta.digest else None
    origin = getattr(module, "__file__", None)
    if origin is None or Path(origin).parent.resolve() == folder.resolve():
        return None
    other = VariantMetadata.for_variant(Path(origin).parent)
    return module if other.digest == meta.digest else None


def _json(raw: bytes, where: str):
    try:
        return json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise InvalidMetadata(f"{where}: not valid JSON ({e})") from None


def _warn(message: str) -> None:
    """A warning attributed to the first caller outside kbuild."""
    frame: FrameType | None = sys._getframe(1)
    level = 2
    while frame is not None and frame.f_globals.get("__name__", "").startswith("kbuild."):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, stacklevel=level)


def _target(system: SystemInfo | None, backend: str | None, check_arch: bool) -> SystemInfo:
    """The system to judge for: `system`, else this one; without a GPU arch when not checked."""
    system = system or _system(backend)
    return system if check_arch else replace(system, gpu_arch=None)


def _system(backend: str | None) -> SystemInfo:
    system = _SYSTEMS.get(backend)
    if system is None:
        system = _SYSTEMS[backend] = detect_system(backend)
    return system


def forget() -> None:
    """Drop this process's memory of refs, variant lists and loaded kernels (for tests; modules
    already imported stay in sys.modules)."""
    with _MEMO_LOCK:
        _LOADED.clear()
        _METADATA.clear()
        _RESOLVED.clear()
        _VARIANTS.clear()
        _SYSTEMS.clear()
