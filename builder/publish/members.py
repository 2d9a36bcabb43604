"""`kbuild publish` of a folder: one kernel, or each member of a workspace to its own repo.

Each member has its own repo, so one the checks refuse (never built, stale, partial, a bad
build.toml) holds back none of the others, and nothing of it is published. A CI slice's
`--variant` names those of its kernels that built them; a member that built none is left alone.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from builder.hub.backend import HubBackend
from builder.layout import BUILD_DIR
from builder.project.manifest import load_manifest
from builder.project.workspace import kernel_dirs
from builder.publish.publish import PublishOptions, PublishResult, publish
from kbuild_common.errors import KbuildError, UsageError


@dataclass(frozen=True)
class MemberPublish:
    """One kernel's outcome: published (result), refused (error) or left alone (unbuilt)."""

    name: str  # its folder's name; for one left alone, its kernel's name
    result: PublishResult | None = None
    error: KbuildError | None = None
    unbuilt: bool = False  # a workspace member that built none of the asked --variant


def publish_members(options: PublishOptions, hub: HubBackend, reporter) -> Iterator[MemberPublish]:
    """Publish each kernel of `options.folder`, yielding each outcome as it is known (one per
    kernel). A lone kernel's error is raised, as `publish` raises it."""
    kernels = kernel_dirs(options.folder)
    if len(kernels) > 1 and options.repo_id:
        raise UsageError("--repo-id names one repo: publish one kernel folder with it, not a workspace")
    for kernel in kernels:
        try:
            outcome = _member(kernel, options, hub, reporter, workspace=len(kernels) > 1)
        except KbuildError as e:
            if len(kernels) == 1:
                raise
            outcome = MemberPublish(kernel.name, error=e)
        yield outcome


def _member(kernel: Path, options: PublishOptions, hub: HubBackend, reporter, workspace: bool) -> MemberPublish:
    manifest = load_manifest(kernel)
    variants = options.variants
    if workspace and variants:
        built = manifest.root / BUILD_DIR
        variants = tuple(v for v in variants if (built / v).is_dir())
        if not variants:
            return MemberPublish(manifest.name, unbuilt=True)
    result = publish(manifest, replace(options, folder=manifest.root, variants=variants), hub, reporter)
    return MemberPublish(kernel.name, result=result)
