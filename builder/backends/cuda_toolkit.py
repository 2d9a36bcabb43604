"""The CUDA toolkit: where nvcc is (CUDA_HOME, else /usr/local/cuda, else the nvcc on PATH), what
it says about itself (the one reader of `nvcc --version`), the archs it compiles for, and the nvcc
flags torch's CMake config adds. The CUDA backend (cuda.py) finds, records and links against it;
probes are kept by binary in the probe folder.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path

from builder.backends.cuda_arch import parse_supported_archs
from kbuild_common import proc
from kbuild_common.errors import CommandError, ToolchainError


@dataclass(frozen=True)
class CudaInfo:
    home: str
    nvcc: str
    version: tuple[int, int]
    archs: frozenset[str]  # base archs nvcc can compile: "75", "90", …
    lib: str = ""  # the folder with libcudart (lib64 in a system CUDA, lib in NVIDIA's wheels)

    def __str__(self) -> str:  # how a toolchain names it (Toolchain.describe)
        return f"nvcc {self.version[0]}.{self.version[1]} ({self.nvcc})"

    @property
    def lib_dir(self) -> str:
        return self.lib or str(Path(self.home) / "lib64")


def find_cuda(cuda_home: str | None, cache_dir: Path | None = None) -> CudaInfo | None:
    """The CUDA toolkit at `cuda_home`, else /usr/local/cuda, else the nvcc on PATH; None if none.
    With `cache_dir`, what nvcc said is kept, keyed by the nvcc binary's path, size and mtime."""
    candidates = [cuda_home] if cuda_home else ["/usr/local/cuda"]
    if not cuda_home and (nvcc := shutil.which("nvcc")):
        candidates.append(str(_real_home(Path(nvcc))))
    for home in candidates:
        binary = Path(home) / "bin" / "nvcc"
        if binary.is_file():
            return _cached_nvcc_probe(Path(home).resolve(), binary.resolve(), cache_dir)
    if cuda_home:
        raise ToolchainError(f"CUDA_HOME={cuda_home} has no bin/nvcc")
    return None


def _real_home(nvcc: Path) -> Path:
    # /usr/local/bin/nvcc may be a wrapper script: read the path it execs.
    text = nvcc.read_text(errors="replace") if nvcc.stat().st_size < 4096 else ""
    if m := re.search(r"(/\S+)/bin/nvcc", text):
        return Path(m[1])
    return nvcc.resolve().parent.parent


def _cached_nvcc_probe(home: Path, nvcc: Path, cache_dir: Path | None) -> CudaInfo:
    if cache_dir is None:
        return _probe_nvcc(home, nvcc)
    st = nvcc.stat()
    key = hashlib.sha256(f"{home}|{nvcc}|{st.st_size}|{st.st_mtime_ns}".encode()).hexdigest()[:16]
    cached = cache_dir / f"nvcc-{key}.json"
    if cached.is_file():
        data = json.loads(cached.read_text())
        return CudaInfo(data["home"], data["nvcc"], tuple(data["version"]), frozenset(data["archs"]), data["lib"])
    info = _probe_nvcc(home, nvcc)
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = cached.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(describe(info)))
    tmp.replace(cached)
    return info


@dataclass(frozen=True)
class NvccVersion:
    cuda: tuple[int, int]  # the CUDA release: (13, 0)
    build: str | None  # nvcc's own version, "13.0.88"; None when the output lacks it


# "Cuda compilation tools, release 13.0, V13.0.88"
_NVCC_RELEASE = re.compile(r"release (\d+)\.(\d+)(?:, V(\d+(?:\.\d+)*))?")


def nvcc_version(nvcc: Path) -> NvccVersion:
    """What `nvcc --version` says, the one reading of it (the probe and the toolchain store)."""
    out = proc.run([str(nvcc), "--version"], timeout=60, what="nvcc --version").stdout
    m = _NVCC_RELEASE.search(out)
    if not m:
        raise ToolchainError(f"cannot read the CUDA version from {nvcc} --version")
    return NvccVersion((int(m[1]), int(m[2])), m[3])


@cache
def nvcc_takes_random_seed(nvcc: str) -> bool:
    """Whether this nvcc has --frandom-seed (its --help lists it). Without a seed, nvcc names the
    internal-linkage symbols of a unit that defines no external function first after a random
    number and its process id, so two builds of one source differ."""
    try:
        return "--frandom-seed" in proc.run([nvcc, "--help"], timeout=60, what="nvcc --help").stdout
    except CommandError:
        return False


def _probe_nvcc(home: Path, nvcc: Path) -> CudaInfo:
    version = nvcc_version(nvcc).cuda
    archs = proc.run([str(nvcc), "--list-gpu-arch"], timeout=60, what="nvcc --list-gpu-arch").stdout
    lib = next((home / d for d in ("lib64", "lib") if (home / d).is_dir()), home / "lib64")
    return CudaInfo(str(home), str(nvcc), version, parse_supported_archs(archs), str(lib))


def describe(info: CudaInfo) -> dict:
    """The probe as JSON data (kept in the probe folder, shown by `kbuild toolchain list --json`)."""
    data = asdict(info)
    data["archs"] = sorted(info.archs, key=int)
    return data


@cache
def recorded_nvcc(nvcc: str) -> str:
    """nvcc's exact build as a toolchain record names it ("13.0.88"; the release when it lacks one)."""
    found = nvcc_version(Path(nvcc))
    return found.build or f"{found.cuda[0]}.{found.cuda[1]}"


def nvcc_origin(nvcc: Path) -> str:
    """"wheel" for NVIDIA's pip packages (a site-packages/nvidia tree, as kbuild's toolchain store
    installs them), else "system"; never the path itself."""
    parts = nvcc.resolve().parts
    return "wheel" if "site-packages" in parts and "nvidia" in parts else "system"
_CMAKE_APPEND = re.compile(r"^\s*list\s*\(\s*APPEND\s+CUDA_NVCC_FLAGS\s+(.*?)\s*\)\s*(?:#.*)?$")


def cmake_nvcc_flags(config: Path) -> tuple[str, ...]:
    """The nvcc flags torch's CMake config appends to every CUDA compile of an extension built with
    CMake (kernel-builder's way): the literal `list(APPEND CUDA_NVCC_FLAGS "...")` lines outside
    any if() block. torch 2.x: --expt-relaxed-constexpr --expt-extended-lambda. Read from the
    torch being built against, so a torch that changes them changes kbuild's flags too."""
    try:
        text = config.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ()  # a torch without its CMake files: torch.utils.cpp_extension's flags only
    flags, depth = [], 0
    for line in text.splitlines():
        code = line.split("#", 1)[0].strip()
        if re.match(r"(if|foreach|function|macro)\s*\(", code):
            depth += 1
        elif re.match(r"end(if|foreach|function|macro)\s*\(", code):
            depth -= 1
        elif depth == 0 and (m := _CMAKE_APPEND.match(code)) and "$" not in m[1]:
            flags += [f.strip('"') for f in m[1].split()]
    return tuple(dict.fromkeys(flags))
