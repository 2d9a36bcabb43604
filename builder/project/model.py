"""The one model of a kernel's build.toml, whatever edition it is written in: what the planner,
the stages and the publisher read. The readers of builder/project/editions/ fill it (one per
edition, each normalizing its spelling to this), so nothing past them knows editions apart, but
for `edition` (recorded in provenance) and `build_layout`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from builder.backends.cuda_arch import Capability
from kbuild.kernel_deps import KernelPin
from kbuild_common.errors import ManifestError

# [general.<x>] tables: an error about a key in one names the table as [general.<x>]
GENERAL_SUBTABLES = ("hub", "cuda", "xpu", "neuron", "tpu")


# a layer map, "LAYER=KERNEL_LAYER": a transformers layer name, then the kernel's layers.<name>
LAYER_MAP = re.compile(r"^([A-Za-z_][\w.]*)=([A-Za-z_]\w*)$")

@dataclass(frozen=True)
class KernelSection:
    name: str
    backend: str
    depends: tuple[str, ...]
    src: tuple[str, ...]
    include: tuple[str, ...] = ()
    cxx_flags: tuple[str, ...] = ()
    cuda_capabilities: tuple[Capability, ...] | None = None
    cuda_flags: tuple[str, ...] = ()
    cuda_minver: str | None = None
    rocm_archs: tuple[str, ...] = ()
    hip_flags: tuple[str, ...] = ()
    sycl_flags: tuple[str, ...] = ()


@dataclass(frozen=True)
class TorchSection:
    src: tuple[str, ...] = ()
    include: tuple[str, ...] = ()
    pyext: tuple[str, ...] = ("py", "pyi")
    minver: str | None = None
    maxver: str | None = None
    cxx_flags: tuple[str, ...] = ()
    stable_abi: dict[str, str] | None = None  # backend ("*" for all) -> minimum torch


@dataclass(frozen=True)
class NoarchSection:
    pyext: tuple[str, ...] = ("py", "pyi")
    cuda_capabilities: tuple[Capability, ...] | None = None
    rocm_archs: tuple[str, ...] = ()


@dataclass(frozen=True)
class Manifest:
    path: Path
    edition: int
    name: str
    backends: tuple[str, ...]
    version: int | None = None
    license: str | None = None
    upstream: str | None = None
    source: str | None = None
    python_depends: tuple[str, ...] = ()  # [general]'s: every variant's
    kernel_depends: tuple[KernelPin, ...] = ()
    backend_python_depends: dict[str, tuple[str, ...]] = field(default_factory=dict)  # [general.<backend>]'s
    backend_kernel_depends: dict[str, tuple[KernelPin, ...]] = field(default_factory=dict)
    hub_repo_id: str | None = None
    hub_branch: str | None = None
    cuda_minver: str | None = None
    cuda_maxver: str | None = None
    torch: TorchSection | None = None
    noarch: NoarchSection | None = None
    kernels: tuple[KernelSection, ...] = ()
    manylinux: str | None = None  # kbuild's [general] manylinux: the ABI floor a build must not exceed
    # kbuild's [general.check-layers]: which transformers layer each kernel layer replaces ("RMSNorm=RMSNorm"),
    # and the model type to check them in (docs/checking-layers.md)
    check_layers_map: tuple[str, ...] = ()
    check_layers_model: str | None = None
    build_layout: str = "files"  # edition 6's [general] build-layout: "zip" stages the Python files in <id>.zip
    kernel_builder: bool = False  # a kernel-builder project (its flake.nix builds it with kernel-builder)
    lines: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def root(self) -> Path:
        return self.path.parent

    @property
    def python_name(self) -> str:
        return self.name.replace("-", "_")

    def kernels_for(self, backend: str) -> tuple[KernelSection, ...]:
        return tuple(k for k in self.kernels if k.backend == backend)

    def python_depends_for(self, backend: str) -> tuple[str, ...]:
        """What a `backend` variant's metadata.json lists: [general]'s, then [general.<backend>]'s."""
        return self.python_depends + self.backend_python_depends.get(backend, ())

    def kernel_depends_for(self, backend: str) -> tuple[KernelPin, ...]:
        return self.kernel_depends + self.backend_kernel_depends.get(backend, ())

    def where(self, *keys: str) -> str:
        """`file:line: [table] key` for an error about `keys` (best line known)."""
        return Where(self.path, self.lines).at(keys)


class Where:
    def __init__(self, path: Path, lines: dict):
        self.path, self.lines = path, lines

    def at(self, keys: tuple[str, ...]) -> str:
        line = self.line(keys)
        table, key = split_table(keys)
        loc = f"{display(self.path)}:{line}" if line else display(self.path)
        return f"{loc}: [{table}] {key}".rstrip() if table else f"{loc}: {key}"

    def line(self, keys: tuple[str, ...]) -> int | None:
        """The line of `keys`, else of the nearest enclosing table or key that is written."""
        for n in range(len(keys), 0, -1):
            if (line := self.lines.get(tuple(keys[:n]))) is not None:
                return line
        return None

    def error(self, keys: tuple[str, ...], message: str) -> ManifestError:
        return ManifestError(f"{self.at(keys)}: {message}", line=self.line(keys))


def split_table(keys: tuple[str, ...]) -> tuple[str, str]:
    if not keys:
        return "", ""
    if keys[0] == "kernel" and len(keys) >= 2:
        return f"kernel.{keys[1]}", ".".join(keys[2:])
    if keys[0] == "general" and len(keys) >= 2 and keys[1] in GENERAL_SUBTABLES:
        return f"general.{keys[1]}", ".".join(keys[2:])
    return keys[0], ".".join(keys[1:])


def display(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)
