"""What one `kbuild build` (or `kbuild variants`) was asked for, resolved once by the CLI through
config/cascade.py. What the planner derives from it (include folders, sysroots) is the planner's
own record (plan/planner.py's Resolved), never written back here."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from builder.config.cascade import Setting, resolve
from builder.config.dist import DistSettings
from builder.config.environment import DEFAULT_TOOLCHAINS, PROBES, PYPI
from builder.config.remote_cache import RemoteCache
from kbuild.settings import DEFAULT_CACHE

if TYPE_CHECKING:
    from builder.backends.cuda_arch import Capability
    from builder.project.manifest import Manifest

MANYLINUX_FLAG = "--manylinux"


@dataclass(frozen=True)
class BuildOptions:
    """What the user asked for, resolved once by the CLI; nothing below reads the environment."""

    folder: Path
    variants: tuple[str, ...] = ()
    compile_jobs: int | None = None  # -j: parallel compiles (ninja's -j)
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
    # only these archs (a partial build): --cuda-archs or TORCH_CUDA_ARCH_LIST ("8.0;9.0a", or "native": the
    # visible GPUs'), parsed once by the CLI; its origin names which in errors
    cuda_archs: Setting[tuple[Capability, ...]] | None = None
    nvcc_threads: int | None = None  # threads per nvcc (NVCC_THREADS); None sizes them from the cores
    manylinux: str | None = None  # `--manylinux`: the ABI floor no library may exceed (else [general] manylinux)
    sysroot: bool = True  # build under a policy against its glibc sysroot (`--no-sysroot`: only check)

    @property
    def probe_dir(self) -> Path:
        """Where the torch and nvcc probes are cached (BuilderSettings.probe_dir's folder)."""
        return self.cache_dir / PROBES

    def manylinux_for(self, manifest: Manifest) -> Setting[str] | None:
        """The manylinux policy `manifest`'s kernel builds for: --manylinux, else its [general] manylinux."""
        return manylinux_policy(self.manylinux, manifest)


def manylinux_policy(flag: str | None, manifest: Manifest | None = None) -> Setting[str] | None:
    """--manylinux, else the kernel's [general] manylinux (None: no policy); each checked against
    auditwheel's policies, the error naming where it was written."""
    def written():
        if manifest is None or manifest.manylinux is None:
            return None
        return manifest.manylinux, manifest.where("general", "manylinux")

    return resolve(flag=(MANYLINUX_FLAG, flag), toml=written, parse=_checked_policy)


def _checked_policy(text: str, origin: str, error: type) -> str:
    from builder.project.manylinux import policy_error  # noqa: PLC0415 - cost: auditwheel's policies (~50 ms), only builds naming one pay

    if problem := policy_error(text):
        raise error(f"{origin}: {problem}")
    return text
