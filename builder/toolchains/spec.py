"""The toolchains a user names (`kbuild toolchain install SPEC...`): a SPEC is torch-X.Y (the release
versions.toml pins), torch-X.Y.Z, either with +cuda for the CUDA build from the store's torch index, a
backend's toolkit by its table and release (cuda-X.Y: builder/backends/), cutlass-X.Y (the headers of PyPI's
nvidia-cutlass X.Y, a release versions.toml lists) or sysroot-X.Y (glibc X.Y headers and link stubs for
manylinux_X_Y builds, sysroot.py); each is parsed against versions.toml and installed into a
ToolchainStore."""

from __future__ import annotations

import re
from dataclasses import dataclass

from builder.backends import BACKENDS
from builder.project.dependencies import cutlass_for
from builder.toolchains.provision import ToolchainStore
from kbuild_common.errors import UsageError

_TOOLKITS = {b.toolkit_table: b for b in BACKENDS.values() if b.toolkit_table}  # "cuda" -> the CUDA backend


@dataclass(frozen=True)
class Spec:
    kind: str              # "torch" | a toolkit's table ("cuda") | "cutlass" | "sysroot"
    version: str           # 2.13.0 | 13.2 | 4.2.0.0 | 2.28 (glibc)
    cuda: bool = False     # torch: the CUDA build
    requirement: str = ""  # a toolkit, cutlass: what installs it (cuda: the pip requirement providing nvcc)

    @property
    def name(self) -> str:
        return f"{self.kind}-{self.version}{'+cuda' if self.cuda else ''}"


def parse_spec(text: str, table: dict) -> Spec:
    """torch-2.13 / torch-2.13.0 / torch-2.13+cuda / cuda-13.2, resolved through versions.toml."""
    torches = table.get("torch", {})
    toolkit = re.fullmatch(r"([a-z]+)-(\d+\.\d+)", text)
    if m := re.fullmatch(r"torch-(\d+\.\d+)(\.\d+[a-z0-9.]*)?(\+cuda)?", text):
        if m[1] in torches:
            version = m[1] + m[2] if m[2] else torches[m[1]]["version"]
            return Spec("torch", version, cuda=bool(m[3]))
    elif toolkit and toolkit[1] in _TOOLKITS:
        if toolkit[2] in table.get(toolkit[1], {}):
            return Spec(toolkit[1], toolkit[2], requirement=table[toolkit[1]][toolkit[2]].get("toolkit", ""))
    elif text.startswith("cutlass-"):
        cutlass = table.get("cutlass", {})
        if release := cutlass_for(text, cutlass.get("releases", [])):
            return Spec("cutlass", release.release, requirement=cutlass["requirement"].format(release=release.release))
    elif m := re.fullmatch(r"sysroot-(\d+)\.(\d+)", text):
        from builder.project.manylinux import policy_error  # noqa: PLC0415 - cost: auditwheel (~50 ms), only a sysroot spec pays

        if "sysroot" in table and not policy_error(f"{m[1]}_{m[2]}"):
            return Spec("sysroot", f"{m[1]}.{m[2]}", requirement=table["sysroot"]["requirement"])
        raise UsageError(f"unknown toolchain {text!r}: no manylinux_{m[1]}_{m[2]} policy for a glibc "
                         f"{m[1]}.{m[2]} sysroot (e.g. sysroot-2.28, sysroot-2.17)")
    known = [f"torch-{v}" for v in torches] + [f"{t}-{v}" for t in _TOOLKITS for v in table.get(t, {})] + sorted(
        {"cutlass-" + ".".join(r.split(".")[:2]) for r in table.get("cutlass", {}).get("releases", [])})
    raise UsageError(f"unknown toolchain {text!r}: expected one of {', '.join(known)} "
                     "(torch-X.Y.Z for another release of a known torch, +cuda for a torch's CUDA build)")


def install(store: ToolchainStore, spec: Spec, *, system_cuda: bool = True, cxx: str = "c++") -> str:
    """Install `spec` into `store` unless it is there; what it is now, as one line: the torch's
    python, CUTLASS's include folders, the sysroot, or the toolkit's backend's line (how nvcc is
    provided and its CUDA_HOME)."""
    if spec.kind == "torch":
        return store.torch_python(spec.version, "cuda" if spec.cuda else None)
    if spec.kind == "cutlass":
        return " ".join(store.cutlass_includes(spec.version, spec.requirement))
    if spec.kind == "sysroot":
        return str(store.sysroot(spec.version, spec.requirement, cxx=cxx))
    major, minor = map(int, spec.version.split("."))
    return _TOOLKITS[spec.kind].install_toolkit(store, (major, minor), spec.requirement, system=system_cuda)
