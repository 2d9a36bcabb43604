"""Plan: turn a manifest and a toolchain into the compile and link steps of each variant.

A pure function of its inputs (no disk, no processes), so plans are tested by value.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from builder.backends import BACKENDS, DEVICE_SOURCES, compiled, in_range, not_compiled
from builder.backends.cuda_arch import Capability
from builder.config.cascade import Setting
from builder.plan.cxx_standard import drop_older_standards, torch_standard
from builder.project.dependencies import parse_dependency
from builder.project.manifest import KernelSection, Manifest
from builder.toolchains.toolchain import TorchInfo
from kbuild.variants import Compute, Noarch, Platform, Torch, TorchStableAbi, Variant
from kbuild_common.errors import KbuildError, ToolchainError

if TYPE_CHECKING:
    from builder.toolchains.sysroot import Sysroot

# a source suffix -> its compile rule: the host C++ compiler's, and each backend's own (builder/backends/)
SOURCE_SUFFIXES = {".cpp": "cxx", ".cc": "cxx", ".cxx": "cxx", ".c": "cxx",
                   **{suffix: tool for suffix, (tool, _) in DEVICE_SOURCES.items()}}
_RULE_OWNERS = {tool: backend for tool, backend in DEVICE_SOURCES.values()}
_HOST_FLAGS = ("-O3", "-fPIC", "-fno-gnu-unique")
LIMITED_API = "-DPy_LIMITED_API=0x03090000"


@dataclass(frozen=True)
class CompileUnit:
    source: Path
    output: Path
    tool: str  # "cxx" or "nvcc"
    flags: tuple[str, ...]
    implicit: tuple[Path, ...] = ()  # headers listed in src: rebuild when they change
    compiler: str = ""  # for nvcc units, the nvcc (variants of one graph may use several)
    section: str = ""  # the [kernel.<name>] it belongs to; "" for the [torch] binding
    depends: tuple[str, ...] = ()  # that section's dependencies (for errors about missing headers)


@dataclass(frozen=True)
class VariantPlan:
    variant: Variant
    ops_name: str
    python_src: Path
    pyext: tuple[str, ...]
    units: tuple[CompileUnit, ...] = ()
    library: Path | None = None  # the linked .so inside the work folder
    link_flags: tuple[str, ...] = ()
    archs: tuple[str, ...] = ()
    partial_archs: bool = False  # built for fewer archs than a full build (--cuda-archs)
    # kernel sections left out because they list none of the --cuda-archs: name -> what they list
    skipped_sections: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # what restricted the archs (--cuda-archs, TORCH_CUDA_ARCH_LIST), for errors that name what to pass
    cuda_archs: Setting[tuple[Capability, ...]] | None = None
    # the project's -std flags older than torch's headers allow, dropped from the units that include
    # torch (builder/plan/cxx_standard.py): (its keys in build.toml, for Manifest.where; the flag)
    older_standards: tuple[tuple[tuple[str, ...], str], ...] = ()

    @property
    def name(self) -> str:
        return self.variant.name

    @property
    def compiled(self) -> bool:
        return self.library is not None

    @property
    def library_os(self) -> str:
        """The OS a compiled variant's libraries are for (their binary format's): its name's platform."""
        assert self.variant.os is not None, f"{self.name}: a compiled variant's name has its platform"
        return self.variant.os


@dataclass(frozen=True)
class Skip:
    backend: str
    reason: str


@dataclass(frozen=True)
class Failure:
    """A variant this toolchain would build but cannot plan (its one-line reason)."""

    variant: str
    reason: str


@dataclass(frozen=True)
class BuildPlan:
    manifest: Manifest
    variants: tuple[VariantPlan, ...]
    skipped: tuple[Skip, ...] = field(default=())
    failed: tuple[Failure, ...] = field(default=())  # only with plan_build(isolate=True)


@dataclass(frozen=True)
class PlanInputs:
    manifest: Manifest
    torch: TorchInfo | None  # None: a toolchain without torch, which plans noarch kernels only
    toolkits: dict  # backend name -> the toolkit its variants are planned with (Toolchain.toolkits)
    source_id: str  # SourceId.short
    work_dir: Path  # where objects and the generated include folder go
    generated_include: Path  # holds registration.h
    # --cuda-archs (or TORCH_CUDA_ARCH_LIST, its origin says which), parsed: build only these
    cuda_archs: Setting[tuple[Capability, ...]] | None = None
    # `depends` name -> its include folders, or the error that kept it from being provisioned; None
    # when not provisioned (`kbuild variants` lists plans)
    dependency_includes: dict | None = field(default_factory=dict)
    sysroot: Sysroot | None = None  # build against an older glibc and libstdc++ (a manylinux policy)

    @property
    def building_torch(self) -> TorchInfo:
        """The torch that compiles a variant: a toolchain without one plans noarch kernels only."""
        if self.torch is None:
            raise ToolchainError(f"{self.manifest.name}: no torch to compile its variants with")
        return self.torch


def ops_name(manifest: Manifest, backend: str, source_id: str) -> str:
    return f"_{manifest.python_name}_{backend}_{source_id}"


def plan_build(inputs: PlanInputs, only: tuple[str, ...] = (), isolate: bool = False) -> BuildPlan:
    """Every variant this toolchain can build for the manifest (or only those named). `isolate`:
    a variant that cannot be planned goes to `failed` instead of raising, so a build goes on with
    the others."""
    m = inputs.manifest
    variants, skipped, failed, names = [], [], [], set()
    for backend in m.backends:
        if m.noarch is not None:
            variants.append(_noarch_plan(inputs, backend))
            names.add(variants[-1].name)
            continue
        reason = _cannot_build(inputs, backend)
        if reason:
            skipped.append(Skip(backend, reason))
            continue
        variant = _variant(inputs, backend, stable_abi(m, backend))
        names.add(variant.name)
        if not only or variant.name in only:  # others are never planned: their headers may be missing
            try:
                variants.append(_compiled_plan(inputs, backend, stable_abi(m, backend)))
            except KbuildError as e:
                if not isolate:
                    raise
                failed.append(Failure(variant.name, str(e) + (f" ({e.hint})" if e.hint else "")))
    if only:
        for name in only:
            if name not in names:
                why = {s.backend: s.reason for s in skipped}
                skipped.append(Skip(name, f"not buildable here (buildable: {', '.join(sorted(names)) or 'none'})"
                                    + (f"; {'; '.join(f'{b}: {r}' for b, r in why.items())}" if why else "")))
        variants = [v for v in variants if v.name in only]
    return BuildPlan(m, tuple(variants), tuple(skipped), tuple(failed))


def _cannot_build(inputs: PlanInputs, backend: str) -> str | None:
    m = inputs.manifest
    assert m.torch is not None  # asked for a kernel without [torch-noarch], which has [torch] (the readers see to it)
    if (built := compiled(backend)) is None:
        return not_compiled(backend)
    torch = inputs.building_torch
    abi = stable_abi(m, backend)
    if abi and abi > torch.torch:
        return (f"[torch] stable-abi {abi[0]}.{abi[1]} is newer than torch {torch.torch_version} building it "
                f"(build with torch >= {abi[0]}.{abi[1]})")
    if not in_range(torch.torch, m.torch.minver, m.torch.maxver):
        return f"torch {torch.torch_version} is outside [torch] minver/maxver"
    return built.cannot_build(inputs)


def stable_abi(m: Manifest, backend: str) -> tuple[int, int] | None:
    """The torch stable ABI `backend` is built for (its own `[torch] stable-abi` entry, else the
    "*" one), or None for an ordinary build against the building torch's full C++ API."""
    table = (m.torch and m.torch.stable_abi) or {}
    version = table.get(backend, table.get("*"))
    if version is None:
        return None
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


def stable_defines(abi: tuple[int, int]) -> tuple[str, ...]:
    """Only torch's stable C API and header-only C++ (torch/csrc/stable, torch/headeronly), at
    the feature level of `abi`. TORCH_TARGET_VERSION packs major, minor, patch and ABI tag into
    one byte each from the top, like torch/headeronly/version.h's TORCH_ABI_VERSION (2.10 ->
    0x020a000000000000)."""
    return "-DTORCH_STABLE_ONLY", f"-DTORCH_TARGET_VERSION=0x{abi[0]:02x}{abi[1]:02x}000000000000"


def _noarch_plan(inputs: PlanInputs, backend: str) -> VariantPlan:
    m = inputs.manifest
    assert m.noarch is not None  # planned only for a [torch-noarch] kernel (plan_build)
    return VariantPlan(
        variant=Variant(framework=Noarch(), compute=Compute(backend)), ops_name=ops_name(m, backend, inputs.source_id),
        python_src=m.root / "torch-ext" / m.python_name, pyext=m.noarch.pyext,
    )


def _variant(inputs: PlanInputs, backend: str, abi: tuple[int, int] | None) -> Variant:
    torch = inputs.building_torch
    framework = TorchStableAbi(abi) if abi else Torch(torch.torch, torch.cxx11)
    return Variant(framework=framework, compute=Compute(backend, BACKENDS[backend].compute(inputs)),
                   platform=Platform.host())


def _compiled_plan(inputs: PlanInputs, backend: str, abi: tuple[int, int] | None = None) -> VariantPlan:
    m = inputs.manifest
    assert m.torch is not None  # a compiled kernel's manifest has [torch] (the readers see to it)
    variant = _variant(inputs, backend, abi)
    name = ops_name(m, backend, inputs.source_id)
    obj_dir = inputs.work_dir / variant.name
    section_caps, caps, left_out = _device_caps(inputs, backend)
    # a --cuda-archs build that leaves archs or sections out is partial: publish refuses it unless told
    partial = inputs.cuda_archs is not None and (
        bool(left_out) or caps != _device_caps(replace(inputs, cuda_archs=None), backend)[1])
    units = []
    compiled_sections = [s for s in _sections(inputs, backend) if s not in left_out]
    binding_flags = _binding_flags(inputs, backend, name, abi) + _binding_dependency_includes(inputs, compiled_sections)
    headers = tuple(m.root / s for s in m.torch.src if Path(s).suffix not in SOURCE_SUFFIXES)
    for src in m.torch.src:
        tool = SOURCE_SUFFIXES.get(Path(src).suffix)
        if tool == "cxx":
            units.append(_unit(inputs, obj_dir, src, tool, binding_flags, headers))
        elif tool is not None:
            device = [f for f in binding_flags if f not in _host_flags(inputs) and not f.startswith("-std")]
            units.append(_unit(inputs, obj_dir, src, tool, _device_flags(inputs, tool, caps, None) + device, headers))
    for section in compiled_sections:
        units.extend(_section_units(inputs, section, obj_dir, section_caps.get(section.name, []), name, abi))
    # the stable ABI's headers (torch/csrc/stable, headeronly) compile as C++17: its units keep the project's -std
    units, older = (units, ()) if abi else _torch_standard_kept(inputs, units)
    return VariantPlan(
        variant=variant, ops_name=name, python_src=m.root / "torch-ext" / m.python_name,
        pyext=m.torch.pyext, units=tuple(units), library=obj_dir / f"{name}.so",
        link_flags=_link_flags(inputs, backend, abi), archs=tuple(str(c) for c in caps), partial_archs=partial,
        skipped_sections=tuple((s.name, tuple(map(str, s.cuda_capabilities or ()))) for s in left_out),
        cuda_archs=BACKENDS[backend].requested_archs(inputs), older_standards=older,
    )


def _torch_standard_kept(inputs: PlanInputs, units: list[CompileUnit]) -> tuple[list[CompileUnit], tuple]:
    """The units that include torch without the project's -std flags that ask for an older C++
    than torch's headers require; and those flags, by where build.toml sets them."""
    m = inputs.manifest
    required = torch_standard(inputs.building_torch)
    sections = {s.name: s for s in m.kernels}
    kept: list[CompileUnit] = []
    older: dict[tuple[tuple[str, ...], str], None] = {}  # ordered, once each
    for unit in units:
        if "torch" not in unit.depends:
            kept.append(unit)
            continue
        flags, dropped = drop_older_standards(list(unit.flags), required)
        kept.append(replace(unit, flags=tuple(flags)) if dropped else unit)
        for flag in dropped:
            older.setdefault((_flags_key(sections.get(unit.section), flag, unit.tool == "cxx"), flag), None)
    return kept, tuple(older)


def _flags_key(section: KernelSection | None, flag: str, host: bool) -> tuple[str, ...]:
    """Where in build.toml `flag` is set, as Manifest.where's keys: the section's flags list that
    holds it (cxx-flags for a host unit, cuda-flags, hip-flags or sycl-flags for a device one), or
    [torch] cxx-flags for the binding's units."""
    if section is None:
        return ("torch", "cxx-flags")
    first = flag.split()[0]
    device = ("cuda_flags", "hip_flags", "sycl_flags")
    lists = ("cxx_flags", *device) if host else (*device, "cxx_flags")
    found = next((k for k in lists if first in getattr(section, k)), "cxx_flags")
    return ("kernel", section.name, found.replace("_", "-"))


def _device_caps(inputs: PlanInputs, backend: str) -> tuple[dict[str, list[Capability]], list[Capability],
                                                             list[KernelSection]]:
    """Each section's device capabilities, the variant's, and the sections left out (the backend's rule)."""
    return BACKENDS[backend].device_capabilities(inputs, _sections(inputs, backend))


def _sections(inputs: PlanInputs, backend: str) -> list[KernelSection]:
    """The kernel sections this toolchain compiles (the backend may leave some out)."""
    return [s for s in inputs.manifest.kernels_for(backend) if BACKENDS[backend].builds_section(inputs, s)]


def _unit(inputs: PlanInputs, obj_dir: Path, src: str, tool: str, flags, implicit,
          section: KernelSection | None = None) -> CompileUnit:
    out = obj_dir / "obj" / PurePosixPath(src).with_suffix(PurePosixPath(src).suffix + ".o")
    compiler = _RULE_OWNERS[tool].compiler(inputs, tool) if tool in _RULE_OWNERS else ""
    return CompileUnit(inputs.manifest.root / src, out, tool, tuple(flags), tuple(implicit), compiler,
                       section.name if section else "", section.depends if section else ("torch",))


def _torch_includes(inputs: PlanInputs, backend: str) -> list[str]:
    dirs = [*inputs.building_torch.include_paths, *BACKENDS[backend].toolkit_includes(inputs)]
    return [f"-I{d}" for d in dirs]


def _torch_api(torch: TorchInfo, abi: tuple[int, int] | None) -> tuple[str, ...]:
    """Which torch API the units that include torch compile against: the building torch's full
    C++ API (its C++ standard library ABI must match), or the stable ABI, whose C shim carries
    no C++ standard library types across, so the library's own default is right."""
    return stable_defines(abi) if abi else (f"-D_GLIBCXX_USE_CXX11_ABI={int(torch.cxx11)}",)


def _project_includes(m) -> list[str]:
    """kernel-builder's CMake gives every unit of the extension the project's `csrc` folder
    (`target_include_directories(... PRIVATE csrc)`): bindings include `cumsum.h` from there
    without naming it in [torch] include (megablocks). Same format, same search path."""
    csrc = m.root / "csrc"
    return [f"-I{csrc}"] if csrc.is_dir() else []


def _binding_flags(inputs: PlanInputs, backend: str, name: str, abi: tuple[int, int] | None = None) -> list[str]:
    m = inputs.manifest
    assert m.torch is not None  # a compiled kernel's manifest has [torch] (the readers see to it)
    return [
        *_host_flags(inputs), torch_standard(inputs.building_torch), f"-D{backend.upper()}_KERNEL",
        f"-DTORCH_EXTENSION_NAME={name}", LIMITED_API, *_torch_api(inputs.building_torch, abi),
        f"-I{inputs.generated_include}", *[f"-I{m.root / d}" for d in m.torch.include], *_project_includes(m),
        *_torch_includes(inputs, backend), *_python_includes(inputs), *m.torch.cxx_flags,
    ]


def _section_units(inputs: PlanInputs, section: KernelSection, obj_dir: Path, caps, name: str,
                   abi: tuple[int, int] | None = None) -> list[CompileUnit]:
    m = inputs.manifest
    uses_torch = "torch" in section.depends
    # kernel-builder defines <BACKEND>_KERNEL for every unit of a build (add_compile_definitions), not
    # only the binding: a kernel source may test `#if defined(CPU_KERNEL)` as well
    common = [f"-D{section.backend.upper()}_KERNEL", *[f"-I{m.root / d}" for d in section.include],
              *_project_includes(m), *_dependency_includes(inputs, section)]
    if uses_torch:
        common += [f"-DTORCH_EXTENSION_NAME={name}", *_torch_api(inputs.building_torch, abi),
                   *_torch_includes(inputs, section.backend), *_python_includes(inputs)]
    else:
        common += BACKENDS[section.backend].standalone_flags(inputs)
    headers = tuple(m.root / s for s in section.src if Path(s).suffix not in SOURCE_SUFFIXES)
    units = []
    for src in section.src:
        tool = SOURCE_SUFFIXES.get(Path(src).suffix)
        if tool in _RULE_OWNERS:
            flags = _device_flags(inputs, tool, caps, section) + common
        elif tool == "cxx":
            flags = [*_host_flags(inputs), torch_standard(inputs.building_torch), *common, *section.cxx_flags]
        else:
            continue
        units.append(_unit(inputs, obj_dir, src, tool, flags, headers, section))
    return units


def _dependency_includes(inputs: PlanInputs, section: KernelSection) -> list[str]:
    """-I for the headers of each dependency the section names (CUTLASS): only its own units get
    them, and the include folders name the release, so a new release is a new compile command."""
    flags = []
    for name in section.depends:
        dep = parse_dependency(name)
        if dep is None or not dep.headers or inputs.dependency_includes is None:  # None: listing only
            continue
        if name not in inputs.dependency_includes:
            raise ToolchainError(f"{inputs.manifest.where('kernel', section.name, 'depends')}: "
                                 f"{name} was not provisioned for this build")
        found = inputs.dependency_includes[name]
        if isinstance(found, KbuildError):  # provisioning it failed: the variants that need it fail
            raise found
        flags += [f"-I{d}" for d in found]
    return flags


def _binding_dependency_includes(inputs: PlanInputs, sections: list[KernelSection]) -> list[str]:
    """The [torch] binding's units see the headers of every dependency the variant's sections name:
    [torch] has no depends of its own, and kernel-builder puts CUTLASS on every unit's include
    path (flash-attn3's flash_api_stable.cpp includes cutlass/numeric_types.h)."""
    return list(dict.fromkeys(flag for s in sections for flag in _dependency_includes(inputs, s)))


def _python_includes(inputs: PlanInputs) -> list[str]:
    """The Python's headers; under a sysroot, with a distribution Python's multiarch ones, which the
    sysroot would hide (Sysroot.python_headers; builder/compile/graph.py puts them there)."""
    torch = inputs.building_torch
    extra = inputs.sysroot.python_header_flags(torch.python_multiarch_include, inputs.generated_include) \
        if inputs.sysroot else ()
    return [f"-I{torch.python_include}", *extra]


def _host_flags(inputs: PlanInputs) -> tuple[str, ...]:
    """What every host compile gets: optimisation, PIC, and the sysroot when there is one."""
    return (*_HOST_FLAGS, *(inputs.sysroot.cxx_flags if inputs.sysroot else ()))


def _device_flags(inputs: PlanInputs, tool: str, caps, section: KernelSection | None) -> list[str]:
    """A device unit's flags: the rule's backend makes them (builder/backends/)."""
    return _RULE_OWNERS[tool].compile_flags(inputs, tool, caps, section, _host_flags(inputs),
                                            torch_standard(inputs.building_torch))


# torch's own libstdc++, by soname and ahead of the compiler driver's libraries: a g++ whose
# library folder holds only libstdc++.a (the H200's /opt/gcc) otherwise links a private static
# copy into the .so, and two libstdc++ in one process crashed in ostream code. Naming the file
# makes the linker take the shared library; the driver's later -lstdc++ then finds nothing to add.
_SHARED_LIBSTDCXX = "-l:libstdc++.so.6"


def _link_flags(inputs: PlanInputs, backend: str, abi: tuple[int, int] | None = None) -> tuple[str, ...]:
    sysroot = inputs.sysroot
    first, last = (sysroot.link_flags, sysroot.link_libraries) if sysroot else ((), ())
    return ("-shared", *BACKENDS[backend].link_options(), *first, *_torch_libraries(inputs, backend, abi),
            _SHARED_LIBSTDCXX, *last)


def _torch_libraries(inputs: PlanInputs, backend: str, abi: tuple[int, int] | None) -> list[str]:
    libs = [f"-L{d}" for d in inputs.building_torch.library_paths]
    # The stable C shim (aoti_torch_*, torch_*) lives in libtorch_cpu (and the backend's torch
    # library): libraries every torch >= the ABI ships under these names.
    libs += ["-ltorch", "-ltorch_cpu"] if abi else ["-lc10", "-ltorch", "-ltorch_cpu"]
    return libs + BACKENDS[backend].libraries(inputs, stable=bool(abi))
