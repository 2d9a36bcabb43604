"""`kbuild build`: manifests → plans → one ninja graph → staged variant folders.

Planning is `plan/planner`, compiling `compile/graph`, checking and staging `stage/finish`; this module
runs them in turn.
"""

from __future__ import annotations

from dataclasses import replace

from builder.compile.graph import run_graph
from builder.config.cascade import value
from builder.config.options import BuildOptions
from builder.layout import WORK_DIR
from builder.plan.planner import plan_kernels
from builder.report import Reporter, VariantResult
from builder.stage.finish import finish_variant, kbuild_source
from builder.stage.load_check import load_errors
from builder.stage.toolchain_record import toolchain_record
from builder.stage.variant_folder import Provenance


def build(options: BuildOptions, reporter: Reporter) -> list[VariantResult]:
    sources: dict = {}
    with reporter.phase(f"planning {options.folder}"):  # probing torch and nvcc, provisioning: seconds to minutes
        plans, results = plan_kernels(options, reporter, sources)
    for j in plans:
        for s in j.plan.skipped:
            results.append(VariantResult(j.plan.manifest.name, s.backend, "skipped", reason=s.reason))
            reporter.info(f"{j.plan.manifest.name}: skipping {s.backend}: {s.reason}")
    outcome = run_graph(options, plans, reporter)
    loaded = _import_check(plans, outcome, reporter)
    kbuild = kbuild_source()
    for j in plans:
        provenance = Provenance(sources[j.plan.manifest.root], kbuild)
        manylinux = value(options.manylinux_for(j.plan.manifest))
        for v in j.plan.variants:
            used = _toolchain(options, j, v, manylinux) if v.compiled else None
            results.append(finish_variant(j.plan.manifest, v, replace(provenance, toolchain=used), outcome,
                                          j.toolchain, options.folder / WORK_DIR, manylinux, j.sysroot,
                                          loaded.get(v.library)))
    return results


def _toolchain(options: BuildOptions, j, v, manylinux: str | None) -> dict:
    return toolchain_record(j.toolchain, v.variant.backend, cxx=options.cxx, edition=j.plan.manifest.edition,
                            source_date_epoch=options.source_date_epoch, sysroot=j.sysroot, manylinux=manylinux)


def _import_check(plans, outcome, reporter: Reporter) -> dict:
    """Import each library this build linked in the torch that built it (one process per torch):
    library path -> why it did not import."""
    by_python: dict[str, dict] = {}
    for j in plans:
        for v in j.plan.variants:
            if v.compiled and outcome is not None and str(v.library) in outcome.step_times and v.library.is_file():
                by_python.setdefault(j.toolchain.torch.python, {})[v.library] = v.ops_name
    errors = {}
    for python, libraries in by_python.items():
        with reporter.phase(f"importing {len(libraries)} new librar{'y' if len(libraries) == 1 else 'ies'} "
                            f"in the torch of {python}"):
            errors.update(load_errors(python, libraries))
    return errors
