"""Assemble a built variant folder (docs/formats.md, "A built variant"; in the zip layout, the
package in `<id>.zip`: builder/stage/zip_layout.py) and swap it into build/ atomically.

The new folder is written beside the old one and renamed into place only when complete, so an
interrupted build leaves the previous good variant.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from builder import __version__, resources
from builder.plan.steps import VariantPlan
from builder.project.gitid import SourceId
from builder.stage.zip_layout import layout_metadata, pack_python
from builder.toolchains.binary import for_os
from kbuild.digest import digest_tree, is_bytecode
from kbuild.metadata import PARTIAL_ARCHS

# backend key beside archs-partial: the kernel sections a --cuda-archs build left out (they list
# none of its archs), each with the capabilities it lists; nothing in the variant calls into them
SKIPPED_SECTIONS = "skipped-sections"


@dataclass(frozen=True)
class Provenance:
    kernel: SourceId
    kbuild: SourceId | None
    toolchain: dict | None = None  # what a compiled variant was built with (builder/stage/toolchain_record.py)


def stage_variant(plan: VariantPlan, manifest, build_dir: Path, provenance: Provenance) -> tuple[Path, bool]:
    """Write build/<variant>/; returns (path, changed). Unchanged content keeps the old folder."""
    final = build_dir / plan.name
    tmp = build_dir / f".{plan.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        _copy_python(plan, tmp)
        _write_ops(plan, tmp)
        if plan.library is not None:  # compiled
            shutil.copy2(plan.library, tmp / f"{plan.ops_name}.abi3.so")
        if manifest.build_layout == "zip":  # the package into <id>.zip, the library beside it
            pack_python(tmp, plan.ops_name)
        abi = for_os(plan.library_os).floor(sorted(tmp.glob("*.so"))).as_metadata() if plan.compiled else None
        metadata = _metadata(plan, manifest, provenance, digest_tree(tmp), abi)
        (tmp / "metadata.json").write_text(json.dumps(metadata, indent=2) + "\n")
        if _same(final, metadata):
            shutil.rmtree(tmp)
            return final, False
        _swap(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final, True


def _copy_python(plan: VariantPlan, dest: Path) -> None:
    suffixes = {f".{e}" for e in plan.pyext}
    for src in sorted(plan.python_src.rglob("*")):
        rel = src.relative_to(plan.python_src)
        if src.is_file() and src.suffix in suffixes and not is_bytecode(rel.as_posix()):
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)


def _write_ops(plan: VariantPlan, dest: Path) -> None:
    template = "_ops.py.in" if plan.compiled else "_ops_noarch.py.in"
    text = resources.read_text(f"templates/{template}")
    (dest / "_ops.py").write_text(text.format(ops_name=plan.ops_name, backend=plan.variant.backend))


def _metadata(plan: VariantPlan, manifest, provenance: Provenance, files: dict[str, str], abi: dict | None) -> dict:
    backend = plan.variant.backend
    metadata = {
        "name": manifest.name,
        "id": plan.ops_name,
        "version": manifest.version,
        "license": manifest.license,
        **{key: value for key in ("upstream", "source") if (value := getattr(manifest, key))},
        # kernel-builder's shape: [general]'s dependencies, then this backend's [general.<backend>]'s
        "python-depends": list(manifest.python_depends_for(backend)),
        "kernel-depends": [d.as_metadata() for d in manifest.kernel_depends_for(backend)],
        "backend": _backend(plan),
        **layout_metadata(manifest.build_layout),  # the zip layout and the kernels release that reads it
        "digest": {"algorithm": "sha256", "files": files},
        "provenance": _provenance(provenance),
    }
    if abi:  # the libraries' floor (their format's): the loader skips a variant this host is below
        metadata["abi"] = abi
    return metadata


def _backend(plan: VariantPlan) -> dict:
    backend: dict[str, object] = {"type": plan.variant.backend, "archs": list(plan.archs)}
    if plan.partial_archs:
        backend[PARTIAL_ARCHS] = True  # only when set: full builds keep kernel-builder's exact shape
    if plan.skipped_sections:
        backend[SKIPPED_SECTIONS] = {name: list(archs) for name, archs in plan.skipped_sections}
    return backend


def _provenance(provenance: Provenance) -> dict:
    # Hugging Face's loader requires a `kernel-builder` record and 40-hex commits (or no
    # `kernel` record at all), so kbuild describes itself there, with `name` telling them apart.
    builder: dict[str, object] = {"name": "kbuild", "version": __version__}
    if provenance.kbuild and provenance.kbuild.commit:
        builder.update(commit=provenance.kbuild.commit, dirty=provenance.kbuild.dirty)
    kernel = provenance.kernel
    record = {"commit": kernel.commit, "dirty": kernel.dirty, "tree": kernel.tree} if kernel.commit else None
    out = {"kernel-builder": builder, "kernel": record}
    if provenance.toolchain is not None:
        out["toolchain"] = provenance.toolchain
    return out


def _same(final: Path, metadata: dict) -> bool:
    try:
        old = json.loads((final / "metadata.json").read_text())
    except (OSError, ValueError):
        return False
    return old == metadata and digest_tree(final) == metadata["digest"]["files"]


def _swap(tmp: Path, final: Path) -> None:
    old = final.with_name(f".{final.name}.old-{os.getpid()}")
    if final.exists():
        final.rename(old)
    tmp.rename(final)
    shutil.rmtree(old, ignore_errors=True)
