"""`kbuild build [DIR]`: build the variants this environment can build, or the matrix (--all)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from builder.commands.arguments import add_dir, add_python, build_options
from kbuild_common.errors import ExitCode

if TYPE_CHECKING:
    from builder.report import Reporter


def add_parser(sub) -> None:
    p = sub.add_parser("build", help="build the variants this environment can build (or the matrix: --all)")
    add_dir(p)
    p.add_argument("--variant", action="append", default=[], metavar="V",
                   help="only this variant (repeatable); one this environment cannot build gets a provisioned "
                        "toolchain")
    p.add_argument("--all", dest="all_variants", action="store_true",
                   help="every variant of the torch x CUDA matrix (builder/versions.toml, [workspace.matrix]), "
                        "provisioning the toolchains under $KBUILD_TOOLCHAINS")
    p.add_argument("-j", "--jobs", type=int, default=None, help="parallel compile jobs (default: ninja's)")
    p.add_argument("--cuda-archs", default=None, metavar="LIST",
                   help='only these CUDA capabilities, e.g. "8.0;9.0a", or "native" for the visible GPUs '
                        "(default: $TORCH_CUDA_ARCH_LIST, else every capability the kernel lists; "
                        "publish refuses such partial builds unless --allow-partial-archs)")
    p.add_argument("-v", "--verbose", action="store_true", help="show compiler output")
    p.add_argument("--no-cache", dest="compile_cache", action="store_false",
                   help="compile without the compile cache (ccache; with --dist, sccache compiles every unit again)")
    p.add_argument("--dist", default=None, metavar="URL",
                   help="distribute the compiles through sccache to this sccache-dist scheduler (default: "
                        "$KBUILD_DIST_SCHEDULER, else [workspace.dist] scheduler; token: $KBUILD_DIST_TOKEN)")
    p.add_argument("--manylinux", default=None, metavar="POLICY",
                   help='build for this manylinux policy, e.g. "2_28": compile and link against its glibc '
                        "sysroot (kbuild toolchain install sysroot-2.28) and fail a variant whose libraries "
                        "still need newer glibc/libstdc++ symbols (default: [general] manylinux; without one "
                        "the floor is recorded and shown)")
    p.add_argument("--no-sysroot", dest="sysroot", action="store_false",
                   help="under a manylinux policy, build with the host's glibc and only check the floor")
    add_python(p)
    p.set_defaults(handler=run)


def run(args, reporter: Reporter) -> int:
    from builder.pipeline import build

    results = build(build_options(args), reporter)
    reporter.summary(results, "kbuild build")
    if any(r.status == "failed" for r in results):
        return ExitCode.FAILED
    if not any(r.status in ("built", "unchanged") for r in results):
        if args.variant:
            reporter.error(f"nothing was built: no kernel here builds {', '.join(args.variant)} in this environment",
                           hint="kbuild variants lists what can be built")
        else:
            reporter.error("nothing was built: no backend of this kernel can be built in this environment")
        return 1
    return ExitCode.OK
