"""The CUDA backend: `.cu` units compiled by nvcc for the capabilities each section lists (or the
CUDA version's defaults, builder/backends/cuda_arch.py), linked against torch's CUDA libraries
and the CUDA runtime of that nvcc's major version."""

from __future__ import annotations

import re
from pathlib import Path

from builder.backends.base import Backend, in_range
from builder.backends.cuda_arch import default_capabilities, restrict, select
from builder.backends.cuda_fatbin import SECTION as FATBIN_SECTION
from builder.backends.cuda_fatbin import fatbin_entries
from builder.backends.cuda_toolkit import (
    cmake_nvcc_flags,
    find_cuda,
    nvcc_origin,
    nvcc_takes_random_seed,
    nvcc_version,
    recorded_nvcc,
)
from builder.backends.cuda_wheels import cuda_home, detail
from builder.backends.nvcc_rule import NVCC, nvcc_script
from kbuild_common.errors import ManifestError, ToolchainError

# torch's COMMON_NVCC_FLAGS minus the defines that disable half/bfloat16 operators, which
# kernel-builder projects are written without.
_DROPPED_NVCC_FLAGS = {
    "-D__CUDA_NO_HALF_OPERATORS__", "-D__CUDA_NO_HALF_CONVERSIONS__",
    "-D__CUDA_NO_BFLOAT16_CONVERSIONS__", "-D__CUDA_NO_HALF2_OPERATORS__",
}


class Cuda(Backend):
    name = "cuda"
    device = "cuda"
    source_tools = {".cu": NVCC}
    driver_libraries = ("libcuda.so", "libnvidia-ml.so")  # the CUDA toolkit ships link stubs for them
    driver = "the NVIDIA driver"
    toolkit_table = "cuda"
    toolkit_label = "CUDA"
    toolkit_row = {"toolkit": (str, "pip requirement of nvcc, like \"cuda-toolkit[nvcc,cccl]==13.2.*\""),
                   "archs": (list, "list of capabilities, like [\"9.0\", \"12.0\"]")}
    torch_row_list = "list of CUDA versions, like [\"13.2\"]"
    torch_row_requires_list = True
    torch_device_build = True
    torch_build_field = "torch.version.cuda"
    torch_index_hint = "set KBUILD_TORCH_INDEX to an index with CUDA builds, e.g. https://download.pytorch.org/whl/cu130"
    torch_probe = """
facts["common_nvcc_flags"] = list(ce.COMMON_NVCC_FLAGS)
facts["cmake_cuda_config"] = os.path.join(os.path.dirname(torch.__file__), "share", "cmake", "Caffe2", "public",
                                          "cuda.cmake")
facts["nvidia_include"] = []
if torch.version.cuda:
    site = os.path.dirname(os.path.dirname(torch.__file__))
    cu = "cu" + torch.version.cuda.split(".")[0]
    facts["nvidia_include"] = sorted(glob.glob(os.path.join(site, "nvidia", cu, "include")))
"""

    # -- its toolkit: nvcc (cuda_toolkit.py) ---------------------------------------------------------

    def find_toolkit(self, torch, options):
        return find_cuda(options.cuda_home, options.probe_dir) if torch.cuda else None

    def provision_toolkit(self, store, release, options):
        home, _ = cuda_home(store, release.version, release.toolkit)
        return find_cuda(home, options.probe_dir)

    def torch_device_version(self, torch) -> str | None:
        return torch.cuda

    def read_torch_facts(self, probed: dict) -> dict:
        # torch.utils.cpp_extension's flags, what torch's CMake config (share/cmake/Caffe2/public/
        # cuda.cmake) adds to every CUDA compile, and the wheel's nvidia/cuXX/include
        return {"common_nvcc_flags": tuple(probed["common_nvcc_flags"]),
                "cmake_nvcc_flags": cmake_nvcc_flags(Path(probed["cmake_cuda_config"])),
                "nvidia_include": tuple(probed["nvidia_include"])}

    def install_toolkit(self, store, version, requirement, system) -> str:
        home, how = cuda_home(store, version, requirement, system=system)
        return f"{how}, CUDA_HOME={home}"

    def stored_toolkit_detail(self, marker: dict) -> str:
        return detail(marker)

    def toolkit_record(self, toolkit) -> dict:
        return {"nvcc": {"version": recorded_nvcc(toolkit.nvcc), "from": nvcc_origin(Path(toolkit.nvcc))}}

    def link_stub_dirs(self, toolkit) -> list[str]:
        home = Path(toolkit.home)
        return [str(Path(d) / "stubs") for d in (toolkit.lib_dir, home / "lib64", home / "lib")]

    def cached_compilers(self, toolkit) -> dict[str, str]:
        return {toolkit.nvcc: "nvcc"}  # named nvcc: ccache recognises the compiler by its name

    def takes_random_seed(self, compiler: str) -> bool:
        return nvcc_takes_random_seed(compiler)

    def cache_wrapper(self, compiler: str) -> str:
        return nvcc_script(compiler)

    def rebuild_env(self, record, rows, store, home, probe_dir) -> dict[str, str]:
        # the recorded nvcc build: the system's, else NVIDIA's wheels of its release through the store
        nvcc = record.get("nvcc")
        if not nvcc:
            return {}
        wanted = nvcc["version"]
        found = find_cuda(home, probe_dir)
        here = nvcc_version(Path(found.nvcc)).build if found else None
        if found and here == wanted:
            return {"CUDA_HOME": found.home}
        m = re.match(r"(\d+)\.(\d+)(\.|$)", wanted) if isinstance(wanted, str) else None
        if not m:
            raise ToolchainError(f"the variant's record names nvcc {wanted!r}: not a CUDA release such as 13.0.88")
        release, version = f"{m[1]}.{m[2]}", (int(m[1]), int(m[2]))
        row = rows.get(release)
        installed = f"nvcc {here} at {found.home}" if found else "no nvcc"
        built = f"the variant was built with nvcc {wanted} ({nvcc.get('from')}); here: {installed}"
        if row is None:
            raise ToolchainError(f"{built}, and the toolchain store knows no CUDA {release}: install nvcc {wanted}, "
                                 "set CUDA_HOME")
        stored, _ = cuda_home(store, version, row["toolkit"], system=False)
        got = nvcc_version(Path(stored) / "bin" / "nvcc").build
        if got != wanted:
            raise ToolchainError(f"{built}, and the toolchain store's CUDA {release} has nvcc {got}: "
                                 f"install nvcc {wanted}, set CUDA_HOME")
        return {"CUDA_HOME": stored}

    # -- planning one variant ------------------------------------------------------------------------

    def cannot_build(self, inputs) -> str | None:
        m, torch, nvcc = inputs.manifest, inputs.torch, self.toolkit(inputs)
        if torch.cuda is None:
            return f"torch {torch.torch_version} is a CPU build (install a CUDA build of torch)"
        if nvcc is None:
            return "no nvcc found (set CUDA_HOME)"
        # Same major: one libcudart soname. A newer minor builds that CUDA's variant (torch's
        # headers do not depend on the minor; the toolkit's headers come from that nvcc alone).
        if nvcc.version[0] != torch.cuda_version[0]:
            have = ".".join(map(str, nvcc.version))
            return f"nvcc is CUDA {have} but torch was built with CUDA {torch.cuda} (the major versions must match)"
        if not in_range(nvcc.version, m.cuda_minver, m.cuda_maxver):
            have = ".".join(map(str, nvcc.version))
            return f"CUDA {have} (nvcc) is outside [general.cuda] minver/maxver"
        return None

    def builds_section(self, inputs, section) -> bool:
        # a section's `cuda-minver` leaves it out of variants built with an older CUDA (kernel-builder's rule)
        return not (section.cuda_minver and not in_range(self.toolkit(inputs).version, section.cuda_minver, None))

    def device_capabilities(self, inputs, sections):
        """Only sections with device code compile for GPU archs (metadata lists what was compiled);
        a binding .cu alone gets the defaults. Under --cuda-archs a section that lists its own
        capabilities but none of those is left out (kernel-builder's rule; a library that still
        calls into it is refused after the link, stage/undefined_symbols.py); a kernel whose every
        such section is left out has nothing to compile, which is an error."""
        section_caps, left_out = {}, []
        for s in sections:
            if self._has_device_code(s.src):
                caps = _capabilities(inputs, s)
                if caps:
                    section_caps[s.name] = caps
                else:
                    left_out.append(s)
        if left_out and not section_caps:
            raise _nothing_to_compile(inputs, left_out)
        caps = sorted({c for cs in section_caps.values() for c in cs})
        if not caps and self._has_device_code(inputs.manifest.torch.src):
            caps = _capabilities(inputs, None)
        return section_caps, caps, left_out

    def requested_archs(self, inputs):
        return inputs.cuda_archs

    def toolkit_includes(self, inputs) -> list[str]:
        # The toolkit's headers first; the wheel's nvidia/cuXX/include only fills in the
        # cuBLAS/cuSPARSE headers that ATen/cuda includes and a bare nvcc install lacks.
        nvcc = self.toolkit(inputs)
        dirs = [str(Path(nvcc.home) / "include")]
        if nvcc.version == inputs.torch.cuda_version:  # never two CUDA minors' headers
            dirs += list(self.torch_facts(inputs.torch)["nvidia_include"])
        return dirs

    def standalone_flags(self, inputs) -> list[str]:
        return [f"-I{Path(self.toolkit(inputs).home) / 'include'}"]

    def compile_flags(self, inputs, tool, capabilities, section, host, std) -> list[str]:
        # torch.utils.cpp_extension's flags, plus what torch's CMake config adds to every CUDA compile
        # of a CMake-built extension (--expt-extended-lambda, ...): kernel-builder builds with CMake.
        torch = self.torch_facts(inputs.torch)
        common = [f for f in torch["common_nvcc_flags"] if f not in _DROPPED_NVCC_FLAGS]
        common += [f for f in torch["cmake_nvcc_flags"] if f not in common]
        fp8 = ["-DENABLE_FP8"] if self.toolkit(inputs).version >= (11, 8) else []
        host_flags = [x for f in host for x in ("-Xcompiler", f)]
        gencode = [g for c in capabilities for g in c.gencode_flags()]
        extra = list(section.cuda_flags) if section else []
        return [*common, *fp8, std, *host_flags, *gencode, *extra]

    def compiler(self, inputs, tool: str) -> str:
        return self.toolkit(inputs).nvcc

    def libraries(self, inputs, stable: bool) -> list[str]:
        # By soname: NVIDIA's nvcc wheels ship libcudart.so.13 in lib/ and no libcudart.so link name.
        nvcc = self.toolkit(inputs)
        cudart = [f"-L{nvcc.lib_dir}", f"-l:libcudart.so.{nvcc.version[0]}"]
        # the stable C shim's CUDA streams and devices live in libtorch_cuda
        return ["-ltorch_cuda", *cudart] if stable else ["-lc10_cuda", "-ltorch_cuda", *cudart]

    def link_options(self) -> list[str]:
        # No local symbols in the library: nvcc names a unit's host-side file (and its static
        # initializer, _GLOBAL__sub_I_<file>) after an intermediate it made, `x.cudafe1.cpp`, which
        # sccache renames `x_0.cudafe1.cpp`, so a distributed compile (`--dist`) would otherwise
        # give another library than a local one from the same sources (docs/formats.md, provenance).
        return ["-Wl,--discard-all"]

    def matrix_toolkits(self, m, matrix, release):
        return [c for c in matrix.toolkits_for(self.name, release) if in_range(c.version, m.cuda_minver, m.cuda_maxver)]

    def why_no_matrix_variant(self, m, matrix) -> str | None:
        if not any(self.matrix_toolkits(m, matrix, r) for r in matrix.torch):
            cudas = ", ".join(f"{c.version[0]}.{c.version[1]}" for c in matrix.releases(self.name)) or "none"
            return f"no CUDA version of the matrix ({cudas}) is inside [general.cuda] minver/maxver"
        return None

    def variant_archs(self, m, release) -> list[str]:
        """Each section's capabilities, else the default list, kept to what `release`'s nvcc supports."""
        requested = set()
        for section in m.kernels_for(self.name):
            if self._has_device_code(section.src):
                requested |= set(section.cuda_capabilities or default_capabilities(release.version))
        if not requested and self._has_device_code(m.torch.src):
            requested = set(default_capabilities(release.version))
        ok, _ = select(sorted(requested), release.archs)
        return [str(c) for c in sorted(ok)]

    def device_code(self, library, binary) -> list:
        return fatbin_entries(binary.section(library, FATBIN_SECTION))

    def _has_device_code(self, sources) -> bool:
        return any(Path(src).suffix in self.source_tools for src in sources)


def _capabilities(inputs, section):
    """What `section` (None: the binding) compiles for; empty when it lists its own capabilities
    and --cuda-archs names none of them (the section is then left out)."""
    explicit = bool(section and section.cuda_capabilities)
    nvcc = CUDA.toolkit(inputs)
    listed = section.cuda_capabilities if explicit else default_capabilities(nvcc.version)
    requested = restrict(list(listed), inputs.cuda_archs.value if inputs.cuda_archs else None, explicit)
    where = inputs.manifest.where("kernel", section.name, "cuda-capabilities") if section else "cuda"
    if not requested:
        return []
    ok, _ = select(list(requested), nvcc.archs)
    if not ok:
        have = ".".join(map(str, nvcc.version))
        raise ManifestError(f"{where}: none of {', '.join(map(str, requested))} is supported by nvcc {have} "
                            f"(it supports {', '.join(sorted(nvcc.archs, key=int))})")
    return sorted(ok)


def _nothing_to_compile(inputs, left_out) -> ManifestError:
    def listed(s) -> str:
        return ", ".join(map(str, s.cuda_capabilities))

    first, *rest = left_out
    others = "".join(f", nor any of [kernel.{s.name}]'s {listed(s)}" for s in rest)
    asked = inputs.cuda_archs
    return ManifestError(f"{inputs.manifest.where('kernel', first.name, 'cuda-capabilities')}: none of "
                         f"{listed(first)} is in {asked.origin} {';'.join(map(str, asked.value))}"
                         f"{others}, and no other section has CUDA code: nothing to compile (build with archs "
                         "this kernel lists)")


CUDA = Cuda()
