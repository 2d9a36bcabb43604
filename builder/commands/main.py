"""The `kbuild` command line: parse → one library call → render. Errors are one line.

The parser needs only the standard library: `kbuild --help` works in a plain `pip install
kbuild`, and a command whose libraries (the `build` extra) are missing says what to install
(builder/extras.py). So each handler imports what it runs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from pathlib import Path

from builder import __version__
from builder.commands import info as info_cli
from builder.commands import lock as lock_cli
from builder.commands import matrix as matrix_cli
from builder.commands import toolchain as toolchain_cli
from builder.errors import ExitCode, KbuildError, ManifestError, UsageError
from builder.commands import hub as serve_cli
from builder.layout import BUILD_DIR
from builder.config.settings import from_environment as builder_settings
from builder.project.workspace import kernel_dirs

TYPE_CHECKING = False
if TYPE_CHECKING:
    from builder.config.options import BuildOptions
    from builder.report import Reporter


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    # What follows `--` goes to pytest untouched (`kbuild test DIR --variant V -- -k name`):
    # split here, since argparse cannot tell optional DIR and trailing arguments apart.
    passthrough = argv[argv.index("--") + 1:] if "--" in argv else []
    args = parser.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    if passthrough and args.command != "test":
        parser.error(f"arguments after -- are for kbuild test only, got {' '.join(passthrough)}")
    args.pytest_args = passthrough
    try:
        return _run(args)
    except ModuleNotFoundError as e:
        from builder.extras import missing_extra_message

        message = None if args.debug else missing_extra_message(e, f"kbuild {args.command}")
        if message is None:
            raise
        print(f"kbuild: error: {message}", file=sys.stderr)  # no rich to print with: it may be what is missing
        return ExitCode.TOOLCHAIN


def _run(args) -> int:
    from builder.report import Reporter

    reporter = Reporter(verbose=getattr(args, "verbose", False), plain=_plain())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            code = args.handler(args, reporter)
        except KbuildError as e:
            _show_warnings(caught, reporter)
            if args.debug:
                raise
            errors = getattr(e, "errors", (e,))  # a build.toml's every error, one line each
            for n, error in enumerate(errors, start=1):
                reporter.error(str(error), e.hint if n == len(errors) else None)
            return e.exit_code
        except KeyboardInterrupt:
            reporter.error(f"interrupted; {_KEPT.get(args.command, 'nothing half-done was kept')}")
            return 130
    _show_warnings(caught, reporter)
    return code


# What an interrupted command leaves: every writer stages its work and swaps it in whole.
_KEPT = {
    "build": "build/ keeps its previous variants",
    "publish": "the branch keeps its previous commit",
    "toolchain": "a half-installed toolchain was removed; installed ones are untouched",
}


def _plain() -> bool | None:
    # CI logs want plain lines, not a live progress bar.
    return True if builder_settings().ci else None


def _show_warnings(caught, reporter: Reporter) -> None:
    for w in caught:
        reporter.warn(str(w.message))


DIR_HELP = "a kernel folder, or a workspace whose build.toml lists members (default: .)"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kbuild", description="Build, test and load ABI-tagged torch kernels.")
    parser.add_argument("--version", action="version", version=f"kbuild {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks for errors")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    # in the order of the work: write, check, build, test, publish; then CI, loading, upkeep
    p = sub.add_parser("init", help="create a kernel project that builds, tests and publishes as generated")
    p.add_argument("name", help="the kernel's name, e.g. fused-scale (its Python package: fused_scale)")
    p.add_argument("--dir", type=Path, default=None, help="the new project's folder (default: ./NAME)")
    p.add_argument("--backends", default="cpu,cuda", metavar="LIST",
                   help="cpu, cuda (compiled, torch's stable ABI) or triton (Python-only); default cpu,cuda")
    p.add_argument("--org", default="me", help="the hub organisation of [general.hub] repo-id (default: me)")
    p.add_argument("--in-repo", action="store_true",
                   help="allow a folder inside another git repository (a workspace member); by default the "
                        "project is a git repository of its own")
    p.set_defaults(handler=_init)

    p = sub.add_parser("check", help="validate build.toml (a kernel or a workspace): every error, one line each")
    p.add_argument("dir", nargs="?", default=".", type=Path, help=DIR_HELP)
    p.set_defaults(handler=_check)

    p = sub.add_parser("variants", help="list the variants of the matrix and the toolchain each is built with")
    p.add_argument("dir", nargs="?", default=".", type=Path, help=DIR_HELP)
    p.add_argument("--json", action="store_true", help="print a machine-readable listing")
    _python_option(p)
    p.set_defaults(handler=_variants)

    p = sub.add_parser("build", help="build the variants this environment can build (or the matrix: --all)")
    p.add_argument("dir", nargs="?", default=".", type=Path, help=DIR_HELP)
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
    _python_option(p)
    p.set_defaults(handler=_build)

    p = sub.add_parser("test", help="run a kernel's tests/ against its built variants")
    p.add_argument("dir", nargs="?", default=".", type=Path, help=DIR_HELP)
    p.add_argument("--variant", action="append", default=[], metavar="V",
                   help="only this built variant (repeatable; default: every variant in build/)")
    p.add_argument("--timeout", type=_positive_seconds, default=None, metavar="S",
                   help="stop a variant's suite after S seconds (default 3600); its log keeps what ran")
    p.epilog = "Arguments after -- go to pytest, e.g. kbuild test kernels/relu -- -k fp16 -x"
    _python_option(p)
    p.set_defaults(handler=_test)

    p = sub.add_parser("publish", help="push built variants to a version branch of a hub repo")
    p.add_argument("dir", nargs="?", default=".", type=Path, help=DIR_HELP)
    p.add_argument("--repo-id", help="ORG/NAME (default: [general.hub] repo-id)")
    p.add_argument("--branch", help="target branch (default: [general.hub] branch, else v<version>)")
    p.add_argument("--variant", action="append", default=[], metavar="V", help="only this variant (repeatable)")
    p.add_argument("--hub", default=None, help="a folder/file:// (local hub) or http(s):// URL "
                   "(default: $KBUILD_HUB, else $HF_ENDPOINT, else ~/.cache/kbuild/hub)")
    p.add_argument("--allow-dirty", action="store_true", help="publish builds of uncommitted sources, or of sources changed since the build")
    p.add_argument("--force", action="store_true", help="allow removing public names from the branch")
    p.add_argument("--allow-partial-archs", action="store_true",
                   help="publish variants built for fewer CUDA archs than the kernel lists (--cuda-archs)")
    p.add_argument("--dry-run", action="store_true", help="print the plan; write nothing")
    p.add_argument("--json", action="store_true", help="print a machine-readable summary")
    p.set_defaults(handler=_publish)

    matrix_cli.add_parser(sub)
    info_cli.add_parser(sub)
    lock_cli.add_parsers(sub)  # lock, download
    serve_cli.add_parser(sub)  # hub serve, hub gc
    toolchain_cli.add_parsers(sub)

    p = sub.add_parser("clean", help="remove built variants and .kbuild/ (or, with --stale, only stale variants)")
    p.add_argument("dir", nargs="?", default=".", type=Path, help="a kernel folder or a workspace (default: .)")
    p.add_argument("--stale", action="store_true",
                   help="only variants built from other sources than the folder holds now, and leftovers "
                        "of interrupted builds")
    p.add_argument("--dry-run", action="store_true", help="print what would be removed; remove nothing")
    p.set_defaults(handler=_clean)

    p = sub.add_parser("completion", help="print a shell completion script: eval \"$(kbuild completion bash)\"")
    p.add_argument("shell", choices=("bash", "zsh", "tcsh"), help="the shell to complete kbuild's commands in")
    p.set_defaults(handler=_completion)

    _debug_everywhere(parser)
    return parser


def _debug_everywhere(parser: argparse.ArgumentParser) -> None:
    """`--debug` after the command too (kbuild build . --debug): every subcommand accepts it; a
    suppressed default keeps one given before the command."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                if not any("--debug" in a.option_strings for a in sub._actions):
                    sub.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                                     help="show tracebacks for errors")
                _debug_everywhere(sub)


def _python_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--python", default=None, metavar="PATH",
                   help="interpreter whose torch to build/test against (default: the one running kbuild)")


def _python(args) -> str:
    if args.python is None:
        return sys.executable
    path = Path(args.python)
    if not path.is_file():
        raise UsageError(f"--python: no interpreter at {args.python}")
    return str(path.absolute())


def _options(args) -> BuildOptions:
    from builder.config.dist import resolve_dist
    from builder.config.options import BuildOptions
    from builder.config.remote_cache import resolve_remote

    env = builder_settings()
    folder = _folder(args.dir).resolve()
    return BuildOptions(
        folder=folder, variants=tuple(args.variant), jobs=getattr(args, "jobs", None),
        python=_python(args), cuda_home=env.cuda_home, cache_dir=env.cache_dir, cxx=env.cxx,
        compile_cache=getattr(args, "compile_cache", True), compile_cache_dir=env.ccache_dir,
        remote_cache=resolve_remote(env.remote_cache, folder),
        dist=resolve_dist(args.dist, env.dist_scheduler, env.dist_token, folder) if hasattr(args, "dist") else None,
        source_date_epoch=env.source_date_epoch, all_variants=getattr(args, "all_variants", False),
        toolchains_dir=env.toolchains_dir, torch_index=env.torch_index,
        **_cuda_archs(args, env.cuda_arch_list), nvcc_threads=_nvcc_threads(env.nvcc_threads),
        manylinux=_manylinux(args), sysroot=getattr(args, "sysroot", True),
    )


def _manylinux(args) -> str | None:
    from builder.project.manylinux import policy_error

    policy = getattr(args, "manylinux", None)
    if policy is not None and (problem := policy_error(policy)):
        raise UsageError(f"--manylinux: {problem}")
    return policy


def _cuda_archs(args, from_env: str | None) -> dict:
    # the flag, else torch's own variable (what torch.utils.cpp_extension and kernel-builder read)
    if getattr(args, "cuda_archs", None) is not None:
        return {"cuda_archs": args.cuda_archs, "cuda_archs_from": "--cuda-archs"}
    if from_env:
        return {"cuda_archs": from_env, "cuda_archs_from": "TORCH_CUDA_ARCH_LIST"}
    return {}


def _nvcc_threads(text: str | None) -> int | None:
    if not text:
        return None
    if not text.isdigit() or int(text) < 1:
        raise UsageError(f"NVCC_THREADS: expected a positive number, got {text!r}")
    return int(text)


def _positive_seconds(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return int(text)


def _folder(path: Path) -> Path:
    if not path.is_dir():
        raise UsageError(f"{path}: not a folder", hint="pass a kernel project folder (with build.toml)")
    return path


def _init(args, reporter: Reporter) -> int:
    from builder.project.scaffold import parse_backends, scaffold

    dest = (args.dir or Path(args.name)).absolute()
    files = scaffold(dest, args.name, parse_backends(args.backends), org=args.org, in_repo=args.in_repo)
    for path in files:
        reporter.info(f"created {path.relative_to(dest.parent)}")
    shown = os.path.relpath(dest) if dest.is_relative_to(Path.cwd()) else str(dest)
    reporter.result(f"{dest}: kernel {args.name} ({args.backends}); next: cd {shown}, commit it "
                    "(git add -A && git commit), then kbuild build . && kbuild test . && kbuild publish .")
    return 0


def _clean(args, reporter: Reporter) -> int:
    from builder.stage.clean import plan_clean, remove
    from builder.commands.toolchain import human_size

    total, count = 0, 0
    for folder in kernel_dirs(_folder(args.dir)):
        for removal in plan_clean(folder.resolve(), stale_only=args.stale):
            if not args.dry_run:
                remove(removal)
            reporter.result(f"{'would remove' if args.dry_run else 'removed'} {removal.path} "
                            f"({human_size(removal.size)}, {removal.why})")
            total, count = total + removal.size, count + 1
        build_dir = folder / BUILD_DIR
        if not args.stale and not args.dry_run and build_dir.is_dir() and not any(build_dir.iterdir()):
            build_dir.rmdir()
    if count:
        reporter.result(f"{'would free' if args.dry_run else 'freed'} {human_size(total)}")
    else:
        reporter.result("nothing to clean" + (" (no stale variants)" if args.stale else ""))
    return 0


def _completion(args, reporter: Reporter) -> int:
    import shtab  # generates the script from this very parser, so it never drifts from the commands

    reporter.result(shtab.complete(_parser(), shell=args.shell))
    return 0


def _check(args, reporter: Reporter) -> int:
    """Every member of a workspace is checked, and every error of each is reported."""
    from builder.project.manifest import check_python_package, load_manifest

    errors = []
    for folder in kernel_dirs(_folder(args.dir)):
        try:
            m = load_manifest(folder)
            check_python_package(m)
        except ManifestError as e:
            errors.append(e)
            continue
        kinds = "torch-noarch" if m.noarch else f"{len(m.kernels)} kernel section(s)"
        reporter.result(f"{m.path}: ok ({m.name}, backends {', '.join(m.backends)}, {kinds})")
    if errors:
        raise ManifestError.of(errors)
    return 0


def _build(args, reporter: Reporter) -> int:
    from builder.pipeline import build

    if args.jobs is not None and args.jobs < 1:
        raise UsageError(f"-j/--jobs: expected a positive number, got {args.jobs}")
    results = build(_options(args), reporter)
    reporter.summary(results, "kbuild build")
    built = [r for r in results if r.status in ("built", "unchanged")]
    if not built and not any(r.status == "failed" for r in results):
        if args.variant:
            reporter.error(f"nothing was built: no kernel here builds {', '.join(args.variant)} in this environment",
                           hint="kbuild variants lists what can be built")
        else:
            reporter.error("nothing was built: no backend of this kernel can be built in this environment")
        return 1
    return ExitCode.FAILED if any(r.status == "failed" for r in results) else ExitCode.OK


def _variants(args, reporter: Reporter) -> int:
    from builder.plan.jobs import variant_rows

    args.variant, args.jobs, args.all_variants = [], None, False
    options = _options(args)
    rows = variant_rows(options)
    if not any(r.get("here") for r in rows):
        _why_none_here(options, reporter)
    if args.json:
        reporter.result(json.dumps(rows, indent=2))
        return 0
    for r in rows:
        if r["variant"] is None:
            reporter.result(f"{r['kernel']}: ({r['backend']} skipped: {r['skipped']})")
            continue
        archs = f"  archs {' '.join(r['archs'])}" if r.get("archs") else ""
        here = "  [this environment]" if r["here"] else ""
        here += "" if r["in_matrix"] else " (not in the matrix: kbuild build without --all)"
        reporter.result(f"{r['kernel']}: {r['variant']}  <- {r['toolchain'] or 'no toolchain (Python only)'}"
                        f"{archs}{here}")
    return 0


def _why_none_here(options: BuildOptions, reporter: Reporter) -> None:
    """variant_rows marks none as this environment's when its torch (or nvcc) is unusable: say why,
    rather than leave every row unmarked."""
    from builder.errors import ToolchainError
    from builder.plan.jobs import find_toolchain

    try:
        find_toolchain(options)
    except ToolchainError as e:
        reporter.warn(f"this environment builds none of these variants: {e} (kbuild build --all or --variant "
                      "provisions the toolchains they need)")


def _publish(args, reporter: Reporter) -> int:
    """One kernel, or each kernel of a workspace (a CI slice: `--variant` names those of its kernels
    that built them; a kernel that built none of them is left alone)."""
    from builder.hub.address import parse_hub
    from builder.hub.open import open_hub
    from builder.project.manifest import load_manifest
    from builder.publish.publish import PublishOptions, publish

    folder = _folder(args.dir).resolve()
    kernels = kernel_dirs(folder)
    if len(kernels) > 1 and args.repo_id:
        raise UsageError("--repo-id names one repo: publish one kernel folder with it, not a workspace")
    settings = builder_settings()  # the hub rule get_kernel and kbuild lock follow too
    hub = open_hub(parse_hub(args.hub or settings.hub), settings.token)
    summaries, refused = [], {}
    for kernel in kernels:
        try:
            manifest = load_manifest(kernel)
            variants = tuple(args.variant)
            if len(kernels) > 1 and variants:
                built = manifest.root / BUILD_DIR
                variants = tuple(v for v in variants if (built / v).is_dir())
                if not variants:
                    reporter.info(f"{manifest.name}: none of {', '.join(args.variant)} is built here; not published")
                    continue
            options = PublishOptions(folder=manifest.root, repo_id=args.repo_id, branch=args.branch,
                                     variants=variants, allow_dirty=args.allow_dirty, force=args.force,
                                     dry_run=args.dry_run, allow_partial_archs=args.allow_partial_archs)
            result = publish(manifest, options, hub, reporter)
        except KbuildError as e:
            if len(kernels) == 1:
                raise
            # Each member has its own repo: one the checks refuse (never built, stale, partial, a bad
            # build.toml) holds back none of the others, and nothing of it is published.
            errors = getattr(e, "errors", (e,))  # a build.toml's every error
            for n, error in enumerate(errors, start=1):
                reporter.error(f"{kernel.name}: not published: {error}", e.hint if n == len(errors) else None)
            refused[kernel.name] = e
            summaries.append({"kernel": kernel.name, "error": str(e)})
            continue
        summaries.append(result.summary())
        if not args.json:
            _report_publish(result, hub, args.dry_run, reporter)
    if args.json:
        reporter.result(json.dumps(summaries[0] if len(kernels) == 1 else summaries, indent=2))
    if refused:
        reporter.info(f"not published: {', '.join(refused)} ({len(refused)} of {len(kernels)} kernels)")
        return next(iter(refused.values())).exit_code
    return 0


def _report_publish(result, hub, dry_run: bool, reporter: Reporter) -> None:
    plan = result.plan
    target = f"{plan.repo_id}@{plan.branch}"
    counts = f"{len(plan.added)} added, {len(plan.replaced)} replaced, {len(plan.deleted)} deleted, " \
             f"{plan.unchanged} unchanged"
    if dry_run:
        reporter.result(f"dry run: {target} ({hub.describe()}), parent {plan.parent or '(new branch)'}: {counts}")
        for kind, paths in (("add", plan.added), ("replace", plan.replaced), ("delete", plan.deleted)):
            for path in paths:
                reporter.result(f"  {kind:8} {path}")
    elif plan.empty:
        reporter.result(f"{target} already has these files ({counts}); nothing to publish")
    else:
        reporter.result(f"published {', '.join(plan.variants)} to {target}: {counts}")
        reporter.result(f"commit {result.commit}")
        reporter.result(result.url)


def _test(args, reporter: Reporter) -> int:
    from builder.verify.kernel_tests import test_kernels

    results = test_kernels(_folder(args.dir).resolve(), tuple(args.variant), _python(args), tuple(args.pytest_args),
                           reporter, cache_dir=_options(args).cache_dir / "probes", timeout=args.timeout)
    reporter.summary(results, "kbuild test")
    if not any(r.status in ("passed", "failed") or r.log for r in results):
        reporter.error("no variant was tested: none is built, or none can load in this torch",
                       hint="kbuild build first, or pass --python")
        return 1
    return ExitCode.FAILED if any(r.status == "failed" for r in results) else ExitCode.OK


if __name__ == "__main__":
    sys.exit(main())
