"""Toolchains: probe a Python environment's torch and find an nvcc, as plain frozen records.

The torch probe runs in the target interpreter (so it works for any provisioned environment)
and reads flags from `torch.utils.cpp_extension`; results are cached by interpreter and torch
install time so a no-op rebuild does not pay torch's import again.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path

from kbuild_common import proc
from builder.backends import compiled
from builder.backends.cuda_arch import Capability, parse_capability, parse_supported_archs
from kbuild_common.errors import CommandError, ToolchainError

# Runs inside the target interpreter; prints one JSON object.
_TORCH_PROBE = r"""
import json, os, sys, sysconfig, glob
import torch
from torch.utils import cpp_extension as ce
info = {
    "python": sys.executable,
    "torch_version": torch.__version__,
    "cuda": torch.version.cuda,
    "cxx11": bool(torch._C._GLIBCXX_USE_CXX11_ABI),
    "include_paths": ce.include_paths(),
    "library_paths": ce.library_paths(),
    "common_nvcc_flags": list(ce.COMMON_NVCC_FLAGS),
    "python_include": sysconfig.get_paths()["include"],
    "python_multiarch_include": "",
    "nvidia_include": [],
    "cmake_cuda_config": os.path.join(os.path.dirname(torch.__file__), "share", "cmake", "Caffe2", "public", "cuda.cmake"),
}
# The installed wheel's own files by their RECORD hashes (not the scripts pip writes outside
# site-packages, whose shebang names this interpreter): the same torch wheel gives the same digest
# in any environment on any machine.
import hashlib
from importlib import metadata
record = metadata.distribution("torch").read_text("RECORD") or ""
own = sorted(",".join(line.split(",")[:2]) for line in record.splitlines()
             if line.count(",") >= 2 and line.split(",")[1] and not line.startswith("../") and "__pycache__/" not in line)
info["files_sha256"] = hashlib.sha256("\n".join(own).encode()).hexdigest() if own else ""
# A distribution's Python (Debian's /usr/bin/python3) splits its headers: pyconfig.h in the include
# folder includes <x86_64-linux-gnu/python3.11/pyconfig.h>, which a build under a sysroot must still find
multiarch = sysconfig.get_config_var("MULTIARCH") or ""
include = info["python_include"]
beside = os.path.join(os.path.dirname(include), multiarch, os.path.basename(include))
if multiarch and os.path.isdir(beside):
    info["python_multiarch_include"] = beside
if torch.version.cuda:
    major = torch.version.cuda.split(".")[0]
    site = os.path.dirname(os.path.dirname(torch.__file__))
    info["nvidia_include"] = sorted(glob.glob(os.path.join(site, "nvidia", "cu" + major, "include")))
print(json.dumps(info))
"""


@dataclass(frozen=True)
class TorchInfo:
    python: str
    torch_version: str
    cuda: str | None
    cxx11: bool
    include_paths: tuple[str, ...]
    library_paths: tuple[str, ...]
    common_nvcc_flags: tuple[str, ...]
    python_include: str
    nvidia_include: tuple[str, ...]
    # a distribution Python's multiarch header folder (/usr/include/x86_64-linux-gnu/python3.11), which
    # its python_include's pyconfig.h includes; "" for a self-contained Python
    python_multiarch_include: str = ""
    cmake_cuda_config: str = ""  # torch's CMake CUDA settings (share/cmake/Caffe2/public/cuda.cmake)
    cmake_nvcc_flags: tuple[str, ...] = ()  # what that file adds to every CUDA compile
    files_sha256: str = ""  # the installed wheel's files (their RECORD lines); "" without a RECORD

    @property
    def torch(self) -> tuple[int, int]:
        return _two(self.torch_version)

    @property
    def cuda_version(self) -> tuple[int, int] | None:
        return _two(self.cuda) if self.cuda else None


@dataclass(frozen=True)
class CudaInfo:
    home: str
    nvcc: str
    version: tuple[int, int]
    archs: frozenset[str]  # base archs nvcc can compile: "75", "90", …
    lib: str = ""  # the folder with libcudart (lib64 in a system CUDA, lib in NVIDIA's wheels)

    @property
    def lib_dir(self) -> str:
        return self.lib or str(Path(self.home) / "lib64")


@dataclass(frozen=True)
class Toolchain:
    """What compiles one kernel's variants: a torch (None plans Python-only, noarch, kernels)
    and, for backends with a device toolkit, an nvcc."""

    torch: TorchInfo | None
    cuda: CudaInfo | None

    def describe(self, backend: str = "cuda") -> str:
        if self.torch is None:
            return ""
        build = f"CUDA {self.torch.cuda} build" if self.torch.cuda else "CPU build"  # torch's own, exactly
        text = f"torch {self.torch.torch_version} ({build}, {self.torch.python})"
        if self.cuda and compiled(backend) is not None and compiled(backend).needs_toolkit:
            text += f" + nvcc {self.cuda.version[0]}.{self.cuda.version[1]} ({self.cuda.nvcc})"
        return text


def _two(version: str) -> tuple[int, int]:
    m = re.match(r"(\d+)\.(\d+)", version)
    return int(m[1]), int(m[2])


def probe_torch(python: str, cache_dir: Path) -> TorchInfo:
    """Describe the torch installed in `python`'s environment."""
    key = _cache_key(python)
    cached = cache_dir / f"torch-{key}.json" if key else None
    if cached and cached.is_file():
        data = json.loads(cached.read_text())
    else:
        try:
            done = proc.run([python, "-c", _TORCH_PROBE], timeout=300, what="torch probe")
        except CommandError as e:
            last = e.output_tail.splitlines()[-1:] or [""]
            raise ToolchainError(f"cannot import torch with {python}: {last[0]}",
                                 hint="install torch into this environment, e.g. pip install torch==2.14.1") from None
        data = json.loads(done.stdout.strip().splitlines()[-1])
        if cached:
            cache_dir.mkdir(parents=True, exist_ok=True)
            tmp = cached.with_suffix(".tmp")
            tmp.write_text(json.dumps(data))
            tmp.replace(cached)
    data["cmake_nvcc_flags"] = cmake_nvcc_flags(Path(data["cmake_cuda_config"]))
    return TorchInfo(**{k: tuple(v) if isinstance(v, list) else v for k, v in data.items()})


_GPU_PROBE = ("import torch\nfor i in range(torch.cuda.device_count() if torch.cuda.is_available() else 0):\n"
              "    print('%d.%d' % torch.cuda.get_device_capability(i))")


def gpu_capabilities(python: str) -> tuple[Capability, ...]:
    """The compute capabilities of the GPUs the torch of `python` sees (`--cuda-archs native`);
    empty without one."""
    out = proc.run([python, "-c", _GPU_PROBE], timeout=300, what="GPU capability probe").stdout
    return tuple(dict.fromkeys(parse_capability(line.strip()) for line in out.splitlines() if line.strip()))


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


_PROBE_SCHEMA = 4  # bump when the probe reports new fields: cached probes are then redone


def _cache_key(python: str) -> str | None:
    # torch/version.py changes with every torch install, so its mtime keys the probe.
    env = Path(python).absolute().parent.parent  # a venv python is a symlink: keep the venv
    versions = sorted(env.glob("lib/python3*/site-packages/torch/version.py"))
    if not versions:
        return None
    stamp = f"{_PROBE_SCHEMA}|{Path(python).absolute()}|{versions[0]}|{versions[0].stat().st_mtime_ns}"
    return hashlib.sha256(stamp.encode()).hexdigest()[:16]


def find_cuda(cuda_home: str | None, cache_dir: Path | None = None) -> CudaInfo | None:
    """The CUDA toolkit at `cuda_home`, else /usr/local/cuda, else the nvcc on PATH; None if none.
    With `cache_dir`, what nvcc said is kept, keyed by the nvcc binary's path, size and mtime."""
    candidates = [cuda_home] if cuda_home else ["/usr/local/cuda"]
    if not cuda_home and (nvcc := shutil.which("nvcc")):
        candidates.append(str(_real_home(Path(nvcc))))
    for home in candidates:
        nvcc = Path(home) / "bin" / "nvcc"
        if nvcc.is_file():
            return _cached_nvcc_probe(Path(home).resolve(), nvcc.resolve(), cache_dir)
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


@lru_cache(maxsize=None)
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


def describe(info: TorchInfo | CudaInfo) -> dict:
    data = asdict(info)
    if isinstance(info, CudaInfo):
        data["archs"] = sorted(info.archs, key=int)
    return data
