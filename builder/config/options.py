"""What one `kbuild build` (or `kbuild variants`) was asked for, resolved once by the CLI."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from kbuild.settings import DEFAULT_CACHE

from builder.project.cuda_arch import Capability
from builder.config.dist import DistSettings
from builder.config.remote_cache import RemoteCache
from builder.config.settings import DEFAULT_TOOLCHAINS, PROBES, PYPI


@dataclass(frozen=True)
class BuildOptions:
    """Resolved once by the CLI; nothing below reads the environment."""

    folder: Path
    variants: tuple[str, ...] = ()
    jobs: int | None = None
    python: str = ""
    cuda_home: str | None = None
    cache_dir: Path = DEFAULT_CACHE
    cxx: str = "c++"
    compile_cache: bool = True  # `--no-cache` turns it off
    compile_cache_dir: Path | None = None  # the user's CCACHE_DIR, else cache_dir / "compile"
    remote_cache: RemoteCache | None = None  # shared with other machines (KBUILD_REMOTE_CACHE, [workspace.cache])
    dist: DistSettings | None = None  # compiles through sccache-dist (--dist, KBUILD_DIST_SCHEDULER, [workspace.dist])
    source_date_epoch: str = "0"  # what __DATE__/__TIME__ expand to (SOURCE_DATE_EPOCH)
    all_variants: bool = False  # `--all`: every variant of the matrix, toolchains provisioned
    toolchains_dir: Path = DEFAULT_TOOLCHAINS  # KBUILD_TOOLCHAINS
    torch_index: str = PYPI  # where CUDA builds of torch come from
    cuda_archs: str | None = None  # "8.0;9.0a" or "native": only these archs (partial build)
    cuda_archs_from: str = "--cuda-archs"  # where cuda_archs came from, for errors
    nvcc_threads: int | None = None  # threads per nvcc (NVCC_THREADS); None sizes them from the cores
    manylinux: str | None = None  # `--manylinux`: the ABI floor no library may exceed (else [general] manylinux)
    sysroot: bool = True  # build under a policy against its glibc sysroot (`--no-sysroot`: only check)
    # filled in by the build: the parsed archs, and each kernel's dependency include folders (None
    # until resolved: `kbuild variants` plans without provisioning them)
    resolved_archs: tuple[Capability, ...] | None = None
    dependency_includes: dict | None = field(default=None, compare=False)
    sysroots: dict | None = field(default=None, compare=False)  # kernel folder -> its Sysroot

    @property
    def probe_dir(self) -> Path:
        """Where the torch and nvcc probes are cached (BuilderSettings.probe_dir's folder)."""
        return self.cache_dir / PROBES
