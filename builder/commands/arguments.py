"""What several commands share: their common arguments (a project folder, --python, --hub) and the
reading of a command's arguments and environment into the library's options, once
(BuildOptions for build, variants and test; the toolchain store). Only the standard library and
the settings and their cascade load here: the parser must build in a plain `pip install kbuild`."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from builder.config.cascade import Setting, resolve, value
from builder.config.environment import from_environment as builder_settings
from kbuild_common.errors import UsageError

if TYPE_CHECKING:
    from builder.backends.cuda_arch import Capability
    from builder.config.options import BuildOptions
    from builder.toolchains.provision import ToolchainStore

DIR_HELP = "a kernel folder, or a workspace whose build.toml lists members (default: .)"
HUB_HELP = ("a folder/file:// (local hub) or http(s):// URL "
            "(default: $KBUILD_HUB, else $HF_ENDPOINT, else ~/.cache/kbuild/hub)")


def add_dir(p: argparse.ArgumentParser, help: str = DIR_HELP) -> None:
    p.add_argument("dir", nargs="?", default=".", type=Path, help=help)


def add_python(p: argparse.ArgumentParser) -> None:
    p.add_argument("--python", default=None, metavar="PATH",
                   help="interpreter whose torch to build/test against (default: the one running kbuild)")


def add_hub(p: argparse.ArgumentParser, help: str = HUB_HELP) -> None:
    p.add_argument("--hub", default=None, help=help)


_PUBLISHED = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+(@.+)?$")  # ORG/NAME or ORG/NAME@REV


def add_kernel_target(p: argparse.ArgumentParser, published_help: str, runs: str) -> None:
    """The DIR | ORG/NAME@REV target of commands that run a kernel's code (bench, check-layers), with --hub and
    --trust-remote-code; `published_help` says what the published form runs, `runs` what trusting it runs."""
    p.add_argument("target", nargs="?", default=".", metavar="DIR | ORG/NAME@REV", help=published_help)
    add_hub(p)
    p.add_argument("--trust-remote-code", action="store_true",
                   help=f"with ORG/NAME@REV: run the {runs} of a repo outside the trusted orgs")


def published(target: str) -> bool:
    """Whether a command's DIR | ORG/NAME@REV target names a published kernel: ORG/NAME[@REV], and no
    folder of that name here (a folder is still a folder)."""
    return not Path(target).is_dir() and _PUBLISHED.match(target) is not None


def folder(path: Path, hint: str = "pass a kernel project folder (with build.toml)") -> Path:
    if not path.is_dir():
        raise UsageError(f"{path}: not a folder", hint=hint)
    return path


def python(args) -> str:
    if args.python is None:
        return sys.executable
    path = Path(args.python)
    if not path.is_file():
        raise UsageError(f"--python: no interpreter at {args.python}")
    return str(path.absolute())


def build_options(args) -> BuildOptions:
    """The arguments of `build` (and the subset `variants` has) with the environment, resolved."""
    from builder.config.dist import resolve_dist
    from builder.config.options import BuildOptions, manylinux_policy
    from builder.config.remote_cache import resolve_remote
    from builder.project.workspace import workspace_url

    jobs = getattr(args, "jobs", None)
    if jobs is not None and jobs < 1:
        raise UsageError(f"-j/--jobs: expected a positive number, got {jobs}")
    env = builder_settings()
    root = folder(args.dir).resolve()
    interpreter = python(args)
    workspace = partial(workspace_url, root)  # the scale-out settings' build.toml: the workspace's, if it is one
    return BuildOptions(
        folder=root, variants=tuple(getattr(args, "variant", ())), compile_jobs=jobs,
        python=interpreter, cuda_home=env.cuda_home, cache_dir=env.cache_dir, cxx=env.cxx,
        compile_cache=getattr(args, "compile_cache", True), compile_cache_dir=env.ccache_dir,
        remote_cache=resolve_remote(env.remote_cache, workspace),
        dist=resolve_dist(args.dist, env.dist_scheduler, env.dist_token, workspace) if hasattr(args, "dist") else None,
        source_date_epoch=env.source_date_epoch, all_variants=getattr(args, "all_variants", False),
        toolchains_dir=env.toolchains_dir, torch_index=env.torch_index,
        cuda_archs=_cuda_archs(args, env.cuda_arch_list, interpreter), nvcc_threads=_nvcc_threads(env.nvcc_threads),
        manylinux=value(manylinux_policy(getattr(args, "manylinux", None))), sysroot=getattr(args, "sysroot", True),
    )


def open_store(log: Callable[[str], None] | None = None) -> ToolchainStore:
    """The toolchain store the environment names: $KBUILD_TOOLCHAINS, $KBUILD_TORCH_INDEX."""
    from builder.toolchains.provision import ToolchainStore

    env = builder_settings()
    return ToolchainStore(env.toolchains_dir, torch_index=env.torch_index, log=log, probe_dir=env.probe_dir)


def _cuda_archs(args, from_env: str | None, interpreter: str) -> Setting[tuple[Capability, ...]] | None:
    """The flag, else torch's own variable (what torch.utils.cpp_extension and kernel-builder read),
    parsed once; None for a command without --cuda-archs (`kbuild variants` lists every arch)."""
    if not hasattr(args, "cuda_archs"):
        return None
    return resolve(flag=("--cuda-archs", args.cuda_archs), env=("TORCH_CUDA_ARCH_LIST", from_env),
                   parse=partial(_arch_list, interpreter=interpreter))


def _arch_list(text: str, origin: str, error: type, interpreter: str) -> tuple[Capability, ...]:
    """`8.0;9.0a` (`8.0 9.0+PTX`, `8.0,9.0`), or `native`: the GPUs the building torch sees."""
    from builder.backends.cuda_arch import parse_arch_list

    if text.strip() == "native":
        from builder.toolchains.toolchain import gpu_capabilities  # probes torch: only `native` pays

        if not (caps := gpu_capabilities(interpreter)):
            raise error(f"{origin} native: torch in {interpreter} sees no GPU",
                        hint='name the archs instead, e.g. --cuda-archs "8.0;9.0a"')
        return caps
    try:
        return parse_arch_list(text, origin)
    except ValueError as e:
        raise error(str(e)) from None


def _nvcc_threads(text: str | None) -> int | None:
    return value(resolve(env=("NVCC_THREADS", text), parse=_positive))


def _positive(text: str, origin: str, error: type) -> int:
    if not text.isdigit() or int(text) < 1:
        raise error(f"{origin}: expected a positive number, got {text!r}")
    return int(text)
