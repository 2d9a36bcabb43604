"""What a build compiles, and with which toolchain: every selected kernel's manifest planned into
ToolchainPlans (one per kernel and toolchain), the toolchains, CUTLASS headers and glibc sysroots they need
provisioned first. `kbuild variants` lists the same plan without building it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from builder.backends import BACKENDS, compiled
from builder.backends.cuda_arch import Capability
from builder.config.cascade import Setting, value
from builder.config.options import BuildOptions
from builder.layout import WORK_DIR
from builder.plan.cxx_standard import torch_standard
from builder.plan.matrix import MatrixSkip, Target, full_matrix, matrix_variants, select, variant_archs
from builder.plan.steps import BuildPlan, PlanInputs, Skip, plan_build
from builder.project.dependencies import parse_dependency, pick_cutlass
from builder.project.gitid import SourceId, source_id
from builder.project.manifest import Manifest, check_python_package, load_manifest
from builder.project.manylinux import policy_glibc
from builder.project.workspace import kernel_dirs, workspace_matrix
from builder.report import Reporter, VariantResult
from builder.toolchains.provision import ToolchainStore
from builder.toolchains.sysroot import Sysroot
from builder.toolchains.toolchain import Toolchain, find_toolchain, probe_torch
from builder.toolchains.versions import load_versions_table
from kbuild.variants import parse_variant
from kbuild_common.errors import KbuildError, ToolchainError
from kbuild_common.notices import notice


@dataclass(frozen=True)
class ToolchainPlan:
    """One kernel planned with one toolchain (a build has one per kernel and toolchain)."""

    plan: BuildPlan
    toolchain: Toolchain
    sysroot: Sysroot | None = None  # the glibc sysroot its compiled variants were planned against


@dataclass(frozen=True)
class Resolved:
    """What the planner derives from a build's options, kept beside them (BuildOptions stays what
    the user asked for)."""

    # kernel folder -> its `depends` name -> include folders (or the error that kept them from being
    # provisioned); None when not provisioned: `kbuild variants` plans without them
    dependency_includes: dict | None = None
    sysroots: dict = field(default_factory=dict)  # kernel folder -> its Sysroot


def load_kernels(options: BuildOptions, sources: dict | None = None,
                 failed: list[VariantResult] | None = None) -> list[tuple[Manifest, SourceId]]:
    """Each kernel's manifest and source id. With `failed`, a workspace member whose manifest is
    bad becomes a failed row there and the others go on; a lone kernel's error is raised."""
    folders = kernel_dirs(options.folder)
    workspace = folders != [options.folder]
    out = []
    for folder in folders:
        try:
            manifest = load_manifest(folder)
            check_python_package(manifest)
        except KbuildError as e:
            if failed is None or not workspace:
                raise
            failed.append(VariantResult(folder.name, "build.toml", "failed", reason=_one_line(e)))
            continue
        source = source_id(folder)
        if sources is not None:
            sources[manifest.root] = source
        out.append((manifest, source))
    return out


def _one_line(e: KbuildError) -> str:
    # a build.toml with several errors holds each in `errors`
    return "; ".join(map(str, getattr(e, "errors", (e,)))) + (f" ({e.hint})" if e.hint else "")


def _inputs(m: Manifest, toolchain: Toolchain, source: SourceId, resolved: Resolved,
            cuda_archs: Setting[tuple[Capability, ...]] | None = None) -> PlanInputs:
    work = m.root / WORK_DIR
    includes = resolved.dependency_includes
    return PlanInputs(m, toolchain.torch, toolchain.toolkits, source.short, work, work / "include",
                      cuda_archs=cuda_archs,
                      dependency_includes=None if includes is None else includes.get(m.root, {}),
                      sysroot=resolved.sysroots.get(m.root))


def resolve_dependencies(options: BuildOptions, kernels: list[tuple[Manifest, SourceId]],
                         toolkits: set[str] | None, reporter) -> dict:
    """Provision the headers (CUTLASS) that the sections this build compiles depend on, once per
    name, and record each kernel's include folders. `toolkits`: the backends with a device toolkit
    whose sections are built (None: every one). A name that cannot be provisioned is recorded as
    its error: planning fails the variants whose sections need it, and only those. Returns
    Resolved.dependency_includes."""
    found: dict = {}  # dependency name -> include folders, shared by the kernels naming it
    includes: dict = {}
    for m, _ in kernels:
        mine = {}
        for section in m.kernels:
            backend = compiled(section.backend)
            if backend is None or (backend.needs_toolkit and toolkits is not None and backend.name not in toolkits):
                continue
            for name in section.depends:
                dep = parse_dependency(name)
                if dep is not None and dep.headers:
                    if name in found:
                        mine[name] = found[name]
                        continue
                    try:
                        mine[name] = found[name] = _cutlass_includes(
                            dep, m.where("kernel", section.name, "depends"), options, reporter)
                    except KbuildError as e:
                        mine[name] = e  # not kept in `found`: it names this kernel's build.toml
        includes[m.root] = mine
    return includes


def resolve_sysroots(options: BuildOptions, kernels: list[tuple[Manifest, SourceId]], reporter) -> dict:
    """The glibc sysroot each compiled kernel with a manylinux policy (--manylinux, else its
    [general] manylinux) builds against, provisioned once per glibc release: Resolved.sysroots."""
    if not options.sysroot:
        return {}
    found: dict[str, Sysroot] = {}
    sysroots = {}
    for m, _ in kernels:
        policy = value(options.manylinux_for(m))
        if not policy or m.noarch is not None:
            continue
        glibc = policy_glibc(policy)
        if glibc not in found:
            store = ToolchainStore(options.toolchains_dir, log=reporter.info, probe_dir=options.probe_dir)
            found[glibc] = Sysroot(store.sysroot(glibc, load_versions_table()["sysroot"]["requirement"], options.cxx),
                                   glibc)
            reporter.info(f"building for manylinux glibc {glibc} against {found[glibc].root}")
        sysroots[m.root] = found[glibc]
    return sysroots


def _cutlass_includes(dep, where: str, options: BuildOptions, reporter) -> tuple[str, ...]:
    """The include folders of the nvidia-cutlass release for `dep` (cutlass_X_Y), installed once."""
    table = load_versions_table().get("cutlass", {})
    release = pick_cutlass(dep.version, table.get("releases", []))
    if release is None:
        raise ToolchainError(f"{where}: {dep.name}: PyPI's nvidia-cutlass has no {dep.version[0]}.x release "
                             f"(known: {', '.join(table.get('releases', []))})")
    if warning := release.warning(dep.name):
        notice(warning)
    store = ToolchainStore(options.toolchains_dir, log=reporter.info, probe_dir=options.probe_dir)
    return store.cutlass_includes(release.release, table["requirement"].format(release=release.release))


def plan_kernels(options: BuildOptions, reporter: Reporter,
                 sources: dict) -> tuple[list[ToolchainPlan], list[VariantResult]]:
    """Plan every selected variant with the toolchain it needs. Without `--all` or `--variant`
    that is this environment's toolchain; otherwise each variant of the matrix that this
    environment cannot build gets a provisioned one. A toolchain that cannot be provisioned
    fails its variants only."""
    failed: list[VariantResult] = []
    kernels = load_kernels(options, sources, failed)
    resolved = Resolved(sysroots=resolve_sysroots(options, kernels, reporter))
    archs = options.cuda_archs
    if not options.all_variants and not options.variants:
        toolchain = find_toolchain(options)
        resolved = replace(resolved, dependency_includes=resolve_dependencies(
            options, kernels, set(toolchain.toolkits), reporter))
        plans = [ToolchainPlan(plan_build(_inputs(m, toolchain, s, resolved, archs), isolate=True), toolchain)
                 for m, s in kernels]
        return _planned(plans, failed, resolved, archs, reporter)
    choice, where = workspace_matrix(options.folder)
    matrix = select(choice, where) if options.all_variants else full_matrix()
    wanted = set(options.variants)
    plans = []
    current = _current_toolchain(options) if options.variants else None
    # a toolkit's sections' headers only when a variant of its backend may be built (not for `--variant <cpu>`)
    resolved = replace(resolved, dependency_includes=resolve_dependencies(
        options, kernels, None if options.all_variants else _backends_of(options.variants), reporter))
    by_target: dict = {}
    for m, source in kernels:
        here: BuildPlan | None = None
        if current is not None:
            here = plan_build(_inputs(m, current, source, resolved, archs), options.variants, isolate=True)
            if here.variants or here.failed:
                plans.append(ToolchainPlan(replace(here, skipped=()), current))
        done = {v.name for v in here.variants} | {f.variant for f in here.failed} if here else set()
        found, skips = matrix_variants(m, matrix)
        for mv in found:
            name = mv.variant.name
            if name in done or (wanted and name not in wanted):
                continue
            done.add(name)
            by_target.setdefault(mv.target, []).append((m, source, name))
        left = wanted - done if wanted else set()
        # why the backends fall out (the per-name "not buildable here" lines would only nest)
        stopped: list[MatrixSkip | Skip] = [*skips, *(here.skipped if here else ())]
        reasons = list(dict.fromkeys(f"{s.backend}: {s.reason}" for s in stopped
                                     if s.backend not in wanted))  # the matrix and this environment agree
        skipped = [Skip(name, "neither this environment nor the versions table builds it"
                        + (f" ({'; '.join(reasons)})" if reasons else "")) for name in sorted(left)]
        if not wanted:
            skipped += [Skip(s.backend, s.reason) for s in skips]
        if skipped:
            plans.append(ToolchainPlan(BuildPlan(m, (), tuple(skipped)), Toolchain(None)))
    for target, items in by_target.items():
        toolchain, error = (Toolchain(None), None) if target is None else _provision(options, target, reporter)
        for m, source, name in items:
            if error:
                failed.append(VariantResult(m.name, name, "failed", reason=f"{target}: {error}"))
                continue
            plan = plan_build(_inputs(m, toolchain, source, resolved, archs), (name,), isolate=True)
            # Only what stops this variant: the toolchain was made for it, not for the other backends.
            stops = tuple(s for s in plan.skipped if s.backend == name)
            plans.append(ToolchainPlan(replace(plan, skipped=stops), toolchain))
    return _planned(_prune_skips(plans, wanted), failed, resolved, archs, reporter)


def _planned(plans: list[ToolchainPlan], failed: list[VariantResult], resolved: Resolved,
             archs: Setting[tuple[Capability, ...]] | None,
             reporter: Reporter) -> tuple[list[ToolchainPlan], list[VariantResult]]:
    """The plans with their sysroots, and every failed row so far: bad manifests, then the variants
    that could not be planned. Sections --cuda-archs left out get one warning each."""
    failed += [VariantResult(j.plan.manifest.name, f.variant, "failed", reason=f.reason)
               for j in plans for f in j.plan.failed]
    left_out: dict = {}  # (kernel, section, its archs) -> the variants it is absent from
    for j in plans:
        for v in j.plan.variants:
            for section, listed in v.skipped_sections:
                left_out.setdefault((j.plan.manifest.name, section, listed), []).append(v.name)
    asked = f"{archs.origin} {';'.join(map(str, archs.value))}" if archs else ""
    for (kernel, section, listed), names in left_out.items():
        reporter.warn(f"{kernel}: skipping [kernel.{section}] (cuda-capabilities {', '.join(listed)}): none of them "
                      f"is in {asked}; it is not compiled into {', '.join(names)}, which kbuild refuses after "
                      "linking if the rest of the library calls into it")
    older: dict = {}  # (where in build.toml, flag, what torch requires) -> the variants it was dropped from
    for j in plans:
        for v in j.plan.variants:
            for keys, flag in v.older_standards:
                required = torch_standard(j.toolchain.torch) if j.toolchain.torch else "?"
                older.setdefault((j.plan.manifest.where(*keys), flag, required), []).append(v.name)
    for (where, flag, required), names in older.items():
        reporter.warn(f"{where}: {flag} is older than the {required} the building torch's headers require; "
                      f"left out of the units that include torch in {', '.join(names)} (the rest keep it)")
    return _with_sysroots(plans, resolved), failed


def _with_sysroots(plans: list[ToolchainPlan], resolved: Resolved) -> list[ToolchainPlan]:
    return [replace(j, sysroot=resolved.sysroots.get(j.plan.manifest.root)) for j in plans]


def _backends_of(variant_names) -> set[str] | None:
    """The backends `--variant` names; None (every one) when a name is not a variant's: the plan
    says so later."""
    try:
        return {parse_variant(name).backend for name in variant_names}
    except ValueError:
        return None


def _prune_skips(plans: list[ToolchainPlan], wanted: set[str]) -> list[ToolchainPlan]:
    """Drop skip lines about a variant that is built after all: by another job of the same
    kernel, or, for a `--variant` name, by another kernel of the workspace (`--variant
    torch-cuda` is about the kernels that build it). A name nothing builds keeps its line."""
    built = {(j.plan.manifest.root, v.name) for j in plans for v in j.plan.variants}
    anywhere = {name for _, name in built}

    def keep(j: ToolchainPlan, s: Skip) -> bool:
        return (j.plan.manifest.root, s.backend) not in built and not (s.backend in wanted and s.backend in anywhere)

    return [replace(j, plan=replace(j.plan, skipped=tuple(s for s in j.plan.skipped if keep(j, s)))) for j in plans]


def _current_toolchain(options: BuildOptions) -> Toolchain | None:
    try:
        return find_toolchain(options)
    except ToolchainError:
        return None  # e.g. kbuild's own environment has no torch: every variant is provisioned


def _provision(options: BuildOptions, target: Target, reporter: Reporter) -> tuple[Toolchain, str | None]:
    """The toolchain for `target`, installing what is missing; (placeholder, reason) on failure."""
    store = ToolchainStore(options.toolchains_dir, torch_index=options.torch_index, log=reporter.info,
                           probe_dir=options.probe_dir)
    try:
        with reporter.phase(f"provisioning {target}"):  # shown under "planning" while pip installs
            toolkit = target.toolkit
            backend = compiled(toolkit.backend) if toolkit else None
            device = backend.name if backend and backend.torch_device_build else None
            python = store.torch_python(target.torch.version, device, reuse=(options.python,))
            torch = probe_torch(python, options.probe_dir)
            toolkits = {backend.name: backend.provision_toolkit(store, toolkit, options)} if backend and toolkit else {}
    except KbuildError as e:
        return Toolchain(None), str(e)
    return Toolchain(torch, toolkits), None


def _rows_from(target) -> dict[str, str]:
    """Where the versions table's rows behind a variant came from: {"torch": "file:line", "cuda": …}
    (kbuild's own table, or an overlay merged over it)."""
    if target is None:
        return {}
    toolkit = target.toolkit
    return {"torch": target.torch.origin, **({_table(toolkit.backend): toolkit.origin} if toolkit else {})}


def _table(backend: str) -> str:
    table = BACKENDS[backend].toolkit_table
    assert table is not None  # asked only of a backend with a toolkit (its variants have a toolkit version)
    return table


def _toolkit_columns(backend: str, version: tuple[int, int] | None) -> dict:
    """A row's toolkit versions, one column per toolkit table ("cuda": "13.0"), the variant's filled in."""
    columns: dict[str, str | None] = {b.toolkit_table: None for b in BACKENDS.values() if b.toolkit_table}
    if version is not None:
        columns[_table(backend)] = ".".join(map(str, version))
    return columns


def variant_rows(options: BuildOptions) -> list[dict]:
    """`kbuild variants`: each variant of the matrix with the toolchain it is built with, and
    whether this environment builds it as it is (`kbuild build` with no flags)."""
    choice, where = workspace_matrix(options.folder)
    matrix = select(choice, where)
    current = _current_toolchain(options)
    here_torch = current.torch.torch_version if current and current.torch else None  # find_toolchain's has one
    rows = []
    for m, source in load_kernels(options):
        here = {v.name: v for v in plan_build(_inputs(m, current, source, Resolved())).variants} if current else {}
        found, skips = matrix_variants(m, matrix)
        for mv in found:
            name, toolkit = mv.variant.name, mv.target.toolkit if mv.target else None
            # a variant this environment builds is built by its torch, named exactly (the table's
            # release, e.g. the newest for a stable-ABI variant, is what --all would provision)
            built_by = current if name in here and mv.target is not None else None
            rows.append({"kernel": m.name, "variant": name,
                         "toolchain": built_by.describe(mv.variant.backend) if built_by
                         else str(mv.target) if mv.target else "",
                         "torch": here_torch if built_by
                         else mv.target.torch.version if mv.target else None,
                         **_toolkit_columns(mv.variant.backend, toolkit.version if toolkit else None),
                         "archs": variant_archs(m, toolkit) if toolkit else [], "here": name in here,
                         "in_matrix": True, "from": _rows_from(mv.target)})
        names = {r["variant"] for r in rows if r["kernel"] == m.name}
        for name, v in here.items():
            if name not in names:  # this environment builds it, but it is not in the matrix
                assert current is not None  # `here` is empty without this environment's toolchain
                rows.append({"kernel": m.name, "variant": name, "toolchain": current.describe(v.variant.backend),
                             "torch": here_torch, "archs": list(v.archs),
                             "here": True, "in_matrix": False,
                             **_toolkit_columns(v.variant.backend, v.variant.compute_version)})
        rows += [{"kernel": m.name, "variant": None, "backend": s.backend, "skipped": s.reason} for s in skips]
    return rows
