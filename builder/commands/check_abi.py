"""`kbuild check-abi PATH`: a built variant folder's libraries (or one `.so`) read with the checks
`kbuild build` runs before staging (builder/stage/abi_report.py): the manylinux floor and the
glibc / GLIBCXX / CXXABI / GCC versions behind it, the Python ABI, the stable-ABI rule, undefined
symbols, the CUDA archs in the fatbins; exit 1 when one breaks what the variant claims. A kernel's
folder (or its build/) checks each built variant in it; a Python-only one has nothing to check.

    kbuild check-abi build/torch-stable-abi210-cu130-x86_64-linux
    kbuild check-abi .
    kbuild check-abi build/torch214-cxx11-cpu-x86_64-linux/_rmsnorm_cpu_1a2b3c4.abi3.so --manylinux 2_28 --json
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from kbuild_common.errors import ExitCode, UsageError

if TYPE_CHECKING:
    from builder.report import Reporter


def add_parser(sub) -> None:
    p = sub.add_parser("check-abi", help="what a built variant's libraries need and carry (manylinux floor, Python "
                                         "and stable ABI, undefined symbols, CUDA archs), against what it claims")
    p.add_argument("path", metavar="PATH", help="a built variant folder (build/<variant>/), one .so, or a kernel's "
                                                "folder (each of its built variants)")
    p.add_argument("--manylinux", metavar="POLICY", default=None,
                   help="hold the libraries to this policy (e.g. 2_28) instead of the floor metadata.json records")
    p.add_argument("--json", action="store_true", help="print a machine-readable record")
    p.set_defaults(handler=run)


def run(args, reporter: Reporter) -> int:
    from builder.stage.abi_report import check_abi

    path = Path(args.path)
    variants = built_variants(path)
    if variants is None:  # one variant folder or one library
        report = check_abi(path, args.manylinux)
        if args.json:
            reporter.result(json.dumps(report.as_json(), indent=2))
        else:
            for line in _lines(report):
                reporter.result(line)
        return ExitCode.FAILED if report.violations else ExitCode.OK
    compiled = [v for v in variants if any(v.glob("*.so"))]
    reports = [check_abi(v, args.manylinux) for v in compiled]
    if args.json:
        reporter.result(json.dumps([r.as_json() for r in reports], indent=2))
    else:
        for variant, report in zip(compiled, reports, strict=True):
            reporter.result(f"== {variant.name}")
            for line in _lines(report):
                reporter.result(line)
        for variant in variants:
            if variant not in compiled:
                reporter.result(f"== {variant.name}: Python only, no libraries to check")
        broken = sum(1 for r in reports if r.violations)
        verdict = f"{broken} break what they claim" if broken else "each keeps what it claims"
        reporter.result(f"{len(reports)} compiled variant(s) checked: {verdict}" if reports
                        else "no compiled variant: nothing to check")
    return ExitCode.FAILED if any(r.violations for r in reports) else ExitCode.OK


def built_variants(path: Path) -> list[Path] | None:
    """The variant folders of a kernel's folder (build.toml beside build/) or of its build/ folder;
    None when `path` is something else (a variant folder, a library), which check_abi reads itself."""
    if not path.is_dir() or any(path.glob("*.so")) or (path / "metadata.json").is_file():
        return None
    kernel = (path / "build.toml").is_file()
    if not kernel and not (path.parent / "build.toml").is_file():
        return None
    built = path / "build" if kernel else path
    variants = sorted(p for p in built.iterdir() if (p / "metadata.json").is_file()) if built.is_dir() else []
    if not variants:
        raise UsageError(f"{built}: no built variant here (expected build/<variant>/ folders with a metadata.json)",
                         hint=f"kbuild build {path if kernel else path.parent}")
    return variants


def _lines(report) -> list[str]:
    lines = []
    for lib in report.libraries:
        needs = ", ".join(f"{family} {version}" for family, version in lib.needs.items())
        lines.append(f"{lib.path}: {lib.manylinux}" + (f" ({needs}: the lowest manylinux policy that allows them)"
                                                      if needs else ""))
        lines.append(f"  Python ABI: {'abi3, the limited API' if lib.python_abi == 'abi3' else 'full (not abi3)'}")
        if report.stable_abi:
            stable_broken = any("stable-ABI variant" in p for p in lib.problems)
            lines.append(f"  torch ABI: stable, {'BROKEN' if stable_broken else 'only the stable C shim'}")
        cubins = [e.arch for e in lib.fatbin if e.kind == "cubin"]
        ptx = [e.arch for e in lib.fatbin if e.kind == "ptx"]
        if cubins or ptx:
            lines.append(f"  CUDA: cubin {' '.join(cubins) or 'none'}" + (f"; PTX {' '.join(ptx)}" if ptx else ""))
        if lib.link is None:
            lines.append("  undefined symbols: not checked (no torch in this Python to resolve them against)")
        else:
            lines.append(f"  undefined symbols: {len(lib.link.undefined) or 'none'} left unresolved")
    claims = []
    if report.policy:
        claims.append(f"{report.policy_name} ({report.policy_origin})")
    if report.archs is not None:
        claims.append(f"CUDA archs {' '.join(report.archs) or 'none'} (metadata.json)")
    if claims:
        lines.append(f"claims: {'; '.join(claims)}")
    if report.violations:
        lines.append(f"{len(report.violations)} violation(s):")
        lines += [f"  {v}" for v in report.violations]
    else:
        lines.append("ok: no violation of what it claims")
    return lines
