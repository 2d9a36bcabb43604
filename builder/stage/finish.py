"""After ninja: each variant checked (its compile and link, the ABI, the manylinux policy) and
staged into build/<variant>/, or reported failed with the compiler's first error and its log.
"""

from __future__ import annotations

from pathlib import Path

from builder.backends import BACKENDS
from builder.compile.diagnose import failure_reason, first_error
from builder.layout import BUILD_DIR
from builder.project.gitid import source_id
from builder.project.manifest import Manifest
from builder.report import VariantResult
from builder.stage.abi_report import library_violations
from builder.stage.link_check import unresolved_symbols
from builder.stage.undefined_symbols import explain
from builder.stage.variant_folder import Provenance, stage_variant
from builder.toolchains.binary import BinaryFormat, for_os
from builder.toolchains.sysroot import Sysroot
from builder.toolchains.toolchain import Toolchain
from kbuild.metadata import VariantMetadata
from kbuild.variants import STABLE_ABI
from kbuild_common.errors import BuildError


def finish_variant(manifest: Manifest, v, provenance: Provenance, outcome, toolchain: Toolchain,
                    graph_dir: Path, manylinux: str | None, sysroot: Sysroot | None = None,
                    load_error: str | None = None) -> VariantResult:
    """`load_error`: why the library did not load (RTLD_NOW) in the torch that built it, when it was tried."""
    build_dir = manifest.root / BUILD_DIR
    used = toolchain.describe(v.variant.backend) if v.compiled else ""
    seconds, log = 0.0, None
    if v.compiled:
        seconds = outcome.variant_seconds(_outputs(v)) if outcome else 0.0
        log = _write_log(v, outcome)
        failed = {out: text for out, text in (outcome.failed_outputs if outcome else {}).items()
                  if out in _outputs(v)}
        if failed or not v.library.is_file():
            reason, details = _failure(v, failed, manifest, graph_dir)
            return VariantResult(manifest.name, v.name, "failed", seconds, log=log, toolchain=used,
                                 reason=reason, details=details)
        relinked = outcome is not None and str(v.library) in outcome.step_times
        binary = for_os(v.library_os)  # the format of the variant's libraries
        problems = library_violations(v.library, binary, v.variant.kind == STABLE_ABI, None) if relinked else []
        if sysroot is not None and (missing := sysroot.too_new(v.library)):  # before the undefined symbols: it says why
            problems.append(f"{v.library.name} uses {', '.join(missing[:3])}, which glibc "
                            f"{sysroot.glibc} does not have (declared by a newer glibc's header)")
        if relinked and not problems and (undefined := _undefined(v, manifest, toolchain, binary)):
            _discard(v.library)
            return VariantResult(manifest.name, v.name, "failed", seconds, log=log, toolchain=used,
                                 reason=undefined.reason, details=undefined.details)
        if load_error and not problems:
            assert toolchain.torch is not None  # it compiled this variant
            problems.append(f"{v.library.name} does not load in torch {toolchain.torch.torch_version}: {load_error}")
        if manylinux:  # checked on every build: the policy may be new, the library not
            problems += binary.above_policy(v.library, manylinux)
        if problems:
            if relinked:
                _discard(v.library)
            return VariantResult(manifest.name, v.name, "failed", seconds, log=log, toolchain=used,
                                 reason="; ".join(problems))
    try:
        path, changed = stage_variant(v, manifest, build_dir, provenance)
    except OSError as e:
        raise BuildError(f"{manifest.name}: cannot write {build_dir / v.name}: {e}") from None
    floor = VariantMetadata.for_variant(path).abi if v.compiled else None
    return VariantResult(manifest.name, v.name, "built" if changed else "unchanged", seconds, path=path, log=log,
                         toolchain=used, floor=_describe_floor(floor))


def _undefined(v, manifest: Manifest, toolchain: Toolchain, binary: BinaryFormat):
    """The library's undefined symbols explained (None when every one resolves): what it was linked
    against (-L) first, then the system's folders, as the loader looks."""
    search = [f[2:] for f in v.link_flags if f.startswith("-L")]
    stubs = [d for name, toolkit in toolchain.toolkits.items() for d in BACKENDS[name].link_stub_dirs(toolkit)]
    check = unresolved_symbols(v.library, binary, search, stubs)
    if not check.undefined:
        return None
    archs = v.cuda_archs
    return explain(v, manifest, check, archs.origin if archs else "", tuple(map(str, archs.value)) if archs else ())


def _discard(library: Path) -> None:
    # A refused library must not be staged by the next build, which would find it up to date:
    # without it, ninja links it again and the checks run again.
    library.unlink(missing_ok=True)


def _describe_floor(floor) -> str:
    if floor is None:
        return ""
    parts = [f"glibc {floor.glibc}" if floor.glibc else "", f"GLIBCXX {floor.glibcxx}" if floor.glibcxx else ""]
    # auditwheel's policies skip glibc releases (2_31, then 2_34): name both what is needed and the
    # lowest policy that allows it, or "glibc 2.32" beside "manylinux_2_34" reads as a contradiction
    needed = ", ".join(p for p in parts if p)
    return (f"needs {floor.manylinux} ({needed}: the lowest manylinux policy that allows them)" if needed
            else f"needs {floor.manylinux}") if floor.manylinux else ""


def _failure(v, failed: dict[str, str], manifest: Manifest, graph_dir: Path) -> tuple[str, tuple[str, ...]]:
    """One line, the first failed unit and why (a missing header names the `depends` it needs),
    and the compiler's lines that follow its first error (the source line and the caret)."""
    units = {str(u.output): u for u in v.units}
    for output, text in failed.items():
        if unit := units.get(output):
            reason = failure_reason(unit, text, manifest.root, graph_dir)
            details = first_error(text, graph_dir)[1:] if "includes" not in reason else []
            return reason, tuple(details)
    if failed:
        output, text = next(iter(failed.items()))
        lines = first_error(text, graph_dir)
        return f"{Path(output).name}: {lines[0].strip()}" if lines else f"{Path(output).name} failed", tuple(lines[1:])
    return "linking failed", ()


def _outputs(v) -> set[str]:
    # Its own objects and library; an object shared with another variant (one compile for both)
    # lies in that variant's folder but is found in the log under the same command.
    return {str(u.output) for u in v.units} | {str(v.library)}


def _write_log(v, outcome) -> Path:
    """build.log beside the variant's objects: the steps ninja ran for it and their output."""
    log = v.library.parent / "build.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    text = outcome.variant_log(v.name, _outputs(v)) if outcome else ""
    log.write_text(text or "nothing to do: every step was up to date\n")
    return log


def kbuild_source():
    # Provenance of kbuild itself when it runs from a git checkout (builder/stage/ is two down).
    root = Path(__file__).resolve().parents[2]
    if (root / ".git").exists():
        return source_id(root)
    return None
