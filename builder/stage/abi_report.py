"""`kbuild check-abi`: what a built variant's libraries (or one `.so`) need and carry, read with the
same checks `kbuild build` runs before it stages a library, against what the variant claims.

Per library: the manylinux floor and the glibc / GLIBCXX / CXXABI / GCC versions behind it
(the format's floor: builder/toolchains/binary/), its Python ABI (an `.abi3.so` may use only the
limited API), whether a stable-ABI variant uses only torch's stable C shim, a static libstdc++
copy (abi_check.py), undefined symbols nothing it loads defines (link_check.py) and the device
code it carries (its backend's answer: CUDA's fatbins, builder/backends/cuda_fatbin.py). A
violation is a break of a claim: the floor recorded in metadata.json (or `--manylinux`), the
abi3 name, the stable-ABI variant name, the archs metadata.json lists (the loader decides fit
from them).
"""

from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass, field
from pathlib import Path

from builder.backends import BACKENDS, compiled
from builder.stage.abi_check import library_problems
from builder.stage.link_check import LinkCheck, unresolved_symbols
from builder.toolchains.binary import BinaryFormat, for_os
from kbuild.variants import STABLE_ABI, Variant, host_os, parse_variant
from kbuild_common.errors import UsageError


@dataclass
class LibraryReport:
    path: Path
    manylinux: str  # the lowest policy that allows what it needs
    needs: dict[str, str]  # GLIBC / GLIBCXX / CXXABI / GCC -> newest version needed
    python_abi: str  # "abi3" (limited API), or "full" (a CPython-version-tagged or untagged extension)
    fatbin: list  # the device code it carries, each entry an arch and a kind (CUDA's: "cubin", "ptx")
    link: LinkCheck | None  # None: no torch here to resolve against
    problems: list[str] = field(default_factory=list)

    def as_json(self) -> dict:
        return {"path": str(self.path), "manylinux": self.manylinux, "needs": self.needs,
                "python-abi": self.python_abi,
                "cuda": {"cubin": [e.arch for e in self.fatbin if e.kind == "cubin"],
                         "ptx": [e.arch for e in self.fatbin if e.kind == "ptx"]},
                "undefined": list(self.link.undefined) if self.link else None,
                "problems": self.problems}


@dataclass
class AbiReport:
    target: Path
    variant: str | None  # the variant folder's name, when the target is (in) one
    stable_abi: bool
    policy: str | None  # the manylinux policy the libraries must keep, and where that claim came from
    policy_origin: str
    policy_name: str | None  # its full name, as the libraries' format spells it
    archs: tuple[str, ...] | None  # the CUDA archs metadata.json lists
    libraries: list[LibraryReport]
    violations: list[str]

    def as_json(self) -> dict:
        return {"target": str(self.target), "variant": self.variant, "stable-abi": self.stable_abi,
                "policy": self.policy, "policy-origin": self.policy_origin, "archs": list(self.archs or []),
                "libraries": [lib.as_json() for lib in self.libraries], "violations": self.violations,
                "ok": not self.violations}


def check_abi(target: Path, policy: str | None = None) -> AbiReport:
    """The report of a variant folder (every `.so` in it, against its metadata.json) or of one
    `.so` (against the metadata.json of its folder, when it lies in one). `policy`: the manylinux
    policy to hold the libraries to, instead of the floor metadata.json records."""
    if not target.exists():
        raise UsageError(f"{target}: no such file or folder (expected a built variant folder or a .so)")
    folder = target if target.is_dir() else target.parent
    libraries = sorted(folder.glob("*.so")) if target.is_dir() else [target]
    if not libraries:
        raise UsageError(f"{target}: no .so in this folder (expected a built variant folder, build/<variant>/)")
    metadata = _metadata(folder)
    variant = _variant(folder)
    stable = variant is not None and variant.kind == STABLE_ABI
    # the variant's os names its libraries' format; a lone library is this machine's
    binary = for_os(variant.os if variant is not None and variant.os else host_os())
    origin = "--manylinux" if policy else ""
    if policy is None and (recorded := (metadata or {}).get("abi", {}).get("manylinux")):
        policy, origin = recorded, f"{folder / 'metadata.json'} abi.manylinux"
    if policy is not None and (why := binary.policy_error(policy)):
        raise UsageError(f"{origin}: {why}")
    archs = tuple((metadata or {}).get("backend", {}).get("archs", ())) if metadata else None
    # the variant's backend reads the device code; a library outside a variant folder, every compiled backend
    backends = [b for b in (compiled(variant.backend),) if b] if variant is not None else list(BACKENDS.values())
    search = _torch_library_dirs()
    reports, violations = [], []
    for lib in libraries:
        report = _library(lib, binary, backends, stable, policy, search)
        violations += report.problems
        reports.append(report)
    if archs is not None and any(r.fatbin for r in reports):  # no device code: nothing to compare
        violations += _arch_violations(archs, reports)
    return AbiReport(target, folder.name if variant is not None else None, stable, policy, origin,
                     binary.policy_name(policy) if policy else None, archs, reports, violations)


def library_violations(lib: Path, binary: BinaryFormat, stable_abi: bool, policy: str | None,
                       abi3: bool = True) -> list[str]:
    """What breaks the promises of a library's variant, as `kbuild build` checks it before staging
    and `kbuild check-abi` afterwards: a static libstdc++, the limited Python API of an .abi3.so,
    torch's stable C shim only in a stable-ABI variant, nothing above the manylinux `policy`."""
    return (library_problems(lib, binary, stable_abi=stable_abi, abi3=abi3)
            + (binary.above_policy(lib, policy) if policy else []))


def _library(lib: Path, binary: BinaryFormat, backends: list, stable: bool, policy: str | None,
             search: list[str] | None) -> LibraryReport:
    abi3 = ".abi3." in lib.name
    found = binary.floor([lib])
    entries = [e for backend in backends for e in backend.device_code(lib, binary)]
    problems = library_violations(lib, binary, stable, policy, abi3)
    link = unresolved_symbols(lib, binary, search) if search is not None else None
    if link and link.undefined:
        more = len(link.undefined) - 3
        shown = ", ".join(link.undefined[:3]) + (f" and {more} more" if more > 0 else "")
        problems.append(f"{lib.name} cannot load: undefined symbol(s) {shown}, defined by no library it loads")
    return LibraryReport(lib, found.policy, found.needs, "abi3" if abi3 else "full", entries, link, problems)


def _arch_violations(archs: tuple[str, ...], reports: list[LibraryReport]) -> list[str]:
    """The fatbins against metadata.json's archs: each listed arch a cubin (and PTX for `+PTX`),
    nothing unlisted."""
    cubins = {e.arch for r in reports for e in r.fatbin if e.kind == "cubin"}
    ptx = {e.arch for r in reports for e in r.fatbin if e.kind == "ptx"}
    listed = {a.removesuffix("+PTX") for a in archs}
    wanted_ptx = {a.removesuffix("+PTX") for a in archs if a.endswith("+PTX")}
    problems = [f"metadata.json lists CUDA arch {a}, but no library carries a {a} cubin"
                for a in sorted(listed - cubins)]
    problems += [f"metadata.json lists {a}+PTX, but no library carries {a} PTX" for a in sorted(wanted_ptx - ptx)]
    if extra := sorted(cubins - listed):
        problems.append(f"the libraries carry cubins for {', '.join(extra)}, which metadata.json does not list "
                        "(the loader decides which GPUs a variant fits from that list)")
    return problems


def _metadata(folder: Path) -> dict | None:
    path = folder / "metadata.json"
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise UsageError(f"{path}: not readable JSON ({e})") from None
    if not isinstance(data, dict):
        raise UsageError(f"{path}: expected a JSON object")
    return data


def _variant(folder: Path) -> Variant | None:
    try:
        return parse_variant(folder.name)
    except ValueError:
        return None


def _torch_library_dirs() -> list[str] | None:
    """Where the libraries a kernel links (torch's, and the CUDA runtime its wheel brings) lie in
    this Python's torch, found without importing it; None without torch."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.origin:
        return None
    torch = Path(spec.origin).parent
    nvidia = sorted(str(p) for p in (torch.parent / "nvidia").glob("*/lib"))
    return [str(torch / "lib"), *nvidia]
