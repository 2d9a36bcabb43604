"""Toolchains: probe a Python environment's torch and find each backend's toolkit beside it, as
plain frozen records.

The torch probe runs in the target interpreter (so it works for any provisioned environment)
and reads flags from `torch.utils.cpp_extension`; results are cached by interpreter and torch
install time so a no-op rebuild does not pay torch's import again.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from builder.backends import BACKENDS
from builder.backends.cuda_arch import Capability, parse_capability
from kbuild_common import proc
from kbuild_common.errors import CommandError, ToolchainError

if TYPE_CHECKING:
    from builder.config.options import BuildOptions

# Runs inside the target interpreter; each backend's own lines follow (Backend.torch_probe), then
# it prints one JSON object.
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
    "python_include": sysconfig.get_paths()["include"],
    "python_multiarch_include": "",
    "facts": {},
}
# The installed wheel's own files by their RECORD hashes (not the scripts pip writes outside
# site-packages, whose shebang names this interpreter): the same torch wheel gives the same digest
# in any environment on any machine.
import hashlib
from importlib import metadata
record = metadata.distribution("torch").read_text("RECORD") or ""
own = sorted(",".join(line.split(",")[:2]) for line in record.splitlines()
             if line.count(",") >= 2 and line.split(",")[1] and not line.startswith("../")
             and "__pycache__/" not in line)
info["files_sha256"] = hashlib.sha256("\n".join(own).encode()).hexdigest() if own else ""
# A distribution's Python (Debian's /usr/bin/python3) splits its headers: pyconfig.h in the include
# folder includes <x86_64-linux-gnu/python3.11/pyconfig.h>, which a build under a sysroot must still find
multiarch = sysconfig.get_config_var("MULTIARCH") or ""
include = info["python_include"]
beside = os.path.join(os.path.dirname(include), multiarch, os.path.basename(include))
if multiarch and os.path.isdir(beside):
    info["python_multiarch_include"] = beside
"""


def _probe_script() -> str:
    """The torch probe with each backend's lines, each filling its own `facts`."""
    parts = [_TORCH_PROBE]
    for b in BACKENDS.values():
        if b.torch_probe:
            parts.append(f"facts = info['facts'][{b.name!r}] = {{}}\n{b.torch_probe}")
    return "\n".join([*parts, "print(json.dumps(info))\n"])


@dataclass(frozen=True)
class TorchInfo:
    python: str
    torch_version: str
    cuda: str | None
    cxx11: bool
    include_paths: tuple[str, ...]
    library_paths: tuple[str, ...]
    python_include: str
    # a distribution Python's multiarch header folder (/usr/include/x86_64-linux-gnu/python3.11), which
    # its python_include's pyconfig.h includes; "" for a self-contained Python
    python_multiarch_include: str = ""
    files_sha256: str = ""  # the installed wheel's files (their RECORD lines); "" without a RECORD
    # backend -> what this torch tells its compiler (Backend.torch_facts: CUDA's nvcc flags and headers)
    facts: dict = field(default_factory=dict, hash=False)

    @property
    def torch(self) -> tuple[int, int]:
        return _two(self.torch_version)

    @property
    def cuda_version(self) -> tuple[int, int] | None:
        return _two(self.cuda) if self.cuda else None


@dataclass(frozen=True)
class Toolchain:
    """What compiles one kernel's variants: a torch (None plans Python-only, noarch, kernels) and
    the device toolkit of each backend that has one and was found (the CUDA backend's nvcc)."""

    torch: TorchInfo | None
    toolkits: dict = field(default_factory=dict)  # backend name -> its toolkit (builder/backends/)

    def describe(self, backend: str) -> str:
        if self.torch is None:
            return ""
        build = f"CUDA {self.torch.cuda} build" if self.torch.cuda else "CPU build"  # torch's own, exactly
        text = f"torch {self.torch.torch_version} ({build}, {self.torch.python})"
        if (toolkit := self.toolkits.get(backend)) is not None:
            text += f" + {toolkit}"
        return text

    def cached_compilers(self) -> list[CachedCompiler]:
        """The toolkits' compilers the compile cache wraps (builder/compile/graph.py)."""
        return [CachedCompiler(program, name, f"{backend}-{toolkit.version[0]}.{toolkit.version[1]}",
                               BACKENDS[backend].takes_random_seed(program), BACKENDS[backend].cache_wrapper(program))
                for backend, toolkit in self.toolkits.items()
                for program, name in BACKENDS[backend].cached_compilers(toolkit).items()]


@dataclass(frozen=True)
class CachedCompiler:
    program: str  # the toolkit's compiler: .../bin/nvcc
    name: str  # what ccache recognises it by: "nvcc"
    folder: str  # the toolkit's own folder of wrappers: "cuda-13.0"
    seeded: bool  # it takes a seed that keeps its output reproducible (--frandom-seed)
    wrapper: str  # the script the compile cache runs in its place, under its name (its backend's)


def find_toolchain(options: BuildOptions) -> Toolchain:
    """The torch of the build's Python and the toolkit each backend finds beside it."""
    torch = probe_torch(options.python, options.probe_dir)
    found = {b.name: b.find_toolkit(torch, options) for b in BACKENDS.values() if b.toolkit_table}
    return Toolchain(torch, {name: toolkit for name, toolkit in found.items() if toolkit is not None})


def _two(version: str) -> tuple[int, int]:
    m = re.match(r"(\d+)\.(\d+)", version)
    if not m:
        raise ToolchainError(f"cannot read a release (major.minor) from version {version!r}")
    return int(m[1]), int(m[2])


def probe_torch(python: str, cache_dir: Path) -> TorchInfo:
    """Describe the torch installed in `python`'s environment."""
    key = _cache_key(python)
    cached = cache_dir / f"torch-{key}.json" if key else None
    if cached and cached.is_file():
        data = json.loads(cached.read_text())
    else:
        try:
            done = proc.run([python, "-c", _probe_script()], timeout=300, what="torch probe")
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
    probed = data.pop("facts")
    facts = {b.name: b.read_torch_facts(probed[b.name]) for b in BACKENDS.values() if b.name in probed}
    fields: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items()}  # JSON: the probe's
    return TorchInfo(**fields, facts=facts)


_GPU_PROBE = ("import torch\nfor i in range(torch.cuda.device_count() if torch.cuda.is_available() else 0):\n"
              "    print('%d.%d' % torch.cuda.get_device_capability(i))")


def gpu_capabilities(python: str) -> tuple[Capability, ...]:
    """The compute capabilities of the GPUs the torch of `python` sees (`--cuda-archs native`);
    empty without one."""
    out = proc.run([python, "-c", _GPU_PROBE], timeout=300, what="GPU capability probe").stdout
    return tuple(dict.fromkeys(parse_capability(line.strip()) for line in out.splitlines() if line.strip()))


def _cache_key(python: str) -> str | None:
    # torch/version.py changes with every torch install, so its mtime keys the probe; the probe's
    # own text keys it too, so a probe that reports more (a new backend's lines) is redone.
    env = Path(python).absolute().parent.parent  # a venv python is a symlink: keep the venv
    versions = sorted(env.glob("lib/python3*/site-packages/torch/version.py"))
    if not versions:
        return None
    probe = hashlib.sha256(_probe_script().encode()).hexdigest()
    stamp = f"{probe}|{Path(python).absolute()}|{versions[0]}|{versions[0].stat().st_mtime_ns}"
    return hashlib.sha256(stamp.encode()).hexdigest()[:16]


