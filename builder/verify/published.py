"""`kbuild matrix --check`: each kernel's version branch on a hub holds the whole matrix in a
usable state — every variant of the matrix present, each fetched and checked against its
digests, and the one this machine fits loaded (the last job of a CI fan-out runs it)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from builder.project.manifest import Manifest
from kbuild.errors import KernelError
from kbuild.refs import KernelRef
from kbuild.variants import detect_system
from kbuild_common.errors import KbuildError, UsageError

if TYPE_CHECKING:
    from kbuild.hub_loader import Session

PROBLEMS = ("missing", "corrupt", "unloadable")


@dataclass(frozen=True)
class Finding:
    status: str  # missing | verified | corrupt (variants) | loaded | unloadable (the branch)
    where: str  # ORG/NAME@branch (commit)
    variant: str = ""
    detail: str = ""  # corrupt, unloadable: why; loaded: the module's name

    @property
    def problem(self) -> bool:
        return self.status in PROBLEMS


def check_published(kernels: list[Manifest], per_variant: dict[str, dict[str, float]], session: Session,
                    branch: str | None = None) -> Iterator[Finding]:
    """Each kernel's branch (`branch`, else its [general.hub] branch, else v<version>) against the
    variant names of `per_variant` (plan/slices.costs) that kernel has, finding by finding."""
    for m in kernels:
        if not m.hub_repo_id:
            raise UsageError(f"{m.path}: [general.hub] repo-id is not set: --check needs the repo of each kernel")
        name = branch or m.hub_branch or (f"v{m.version}" if m.version is not None else None)
        if name is None:
            raise UsageError(f"{m.path}: no [general] version and no [general.hub] branch: pass --branch")
        expected = sorted(variant for variant, by_kernel in per_variant.items() if m.name in by_kernel)
        try:
            commit = session.commit(KernelRef(m.hub_repo_id, name))
            held = set(session.reader.variants(m.hub_repo_id, commit))
        except KernelError as e:
            raise KbuildError(f"{m.hub_repo_id}@{name}: {e}") from None
        where = f"{m.hub_repo_id}@{name} ({commit[:12]})"
        missing = [variant for variant in expected if variant not in held]
        for variant in missing:
            yield Finding("missing", where, variant)
        for variant in (v for v in expected if v in held):
            try:
                session.install(m.hub_repo_id, commit, variant)  # fetched and checked against its digests
                yield Finding("verified", where, variant)
            except (KernelError, OSError) as e:  # OSError: the cache's disk (full, read-only)
                yield Finding("corrupt", where, variant, str(e))
        if missing:
            continue
        try:
            found = session.resolve(KernelRef(m.hub_repo_id, commit), detect_system())
            # the variant load_best imported: found.chosen, unless its metadata rejected that one
            loaded, module = session.load_best(found)
        except (KernelError, OSError, ImportError) as e:  # ImportError: the kernel's own import failed
            yield Finding("unloadable", where, detail=str(e))
            continue
        yield Finding("loaded", where, loaded, module.__name__)
