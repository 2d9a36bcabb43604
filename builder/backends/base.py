"""What every compiled backend answers: the interface the planner, the matrix and the checks ask.

The defaults are a host-only backend's (CPU): nothing beyond torch to find, no device code, no
archs, no toolkit. A backend with a device toolkit names its table of versions.toml (`toolkit_table`:
its axis of the matrix, whose rows the torch rows list under the same key) and says how its toolkit
is found, provisioned, recorded and linked; it overrides what else differs (builder/backends/cuda.py).
Backends lie below every stage that asks them, so they import none: `inputs` is builder/plan/steps.py's
PlanInputs (the manifest, torch, the toolkit, the requested archs), `section` a manifest's KernelSection,
`m` a Manifest, `matrix` and `release` builder/plan/matrix.py's Matrix and TorchRelease, `torch` a
toolchain's TorchInfo, `options` a build's BuildOptions, `store` the ToolchainStore
(builder/toolchains/provision.py), `toolkit` what the backend's own find_toolkit or provision_toolkit
returned.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

Version = tuple[int, int]

# how gcc (and a compiler that speaks like it) writes a unit's header dependencies for ninja
GCC_DEPFILE = "-MMD -MF $out.d"


@dataclass(frozen=True)
class CompileRule:
    """One compile rule of the ninja graph (builder/compile/ninja_file.py writes it): the host C++
    compiler's, or a backend's for its own sources (`Backend.source_tools`). Its command runs the
    compiler (the variable `$<tool>`) behind the compile cache's launcher with the unit's flags, the
    prefix maps that keep the project's folder out of the object (handed to the host compiler as
    `host_option` says) and the flags a unit gets from its own path, and writes $out.d as gcc does."""

    tool: str  # the rule's name, and the ninja variable naming its compiler: "nvcc"
    label: str  # how its steps' status lines begin: "NVCC"
    depfile: str = GCC_DEPFILE  # the options that make the compiler write $out.d
    host_option: str = ""  # what hands one option on to the host compiler ("-Xcompiler"); "": none needed
    # the flags a unit gets from its path: (source, the folder whose .kbuild/ holds the graph, whether
    # its compiler takes a seed) -> flags; None: the rule has none
    source_flags: Callable[[Path, Path | None, bool], list[str]] | None = None

    def command(self) -> str:
        source = f" ${self.tool}_source" if self.source_flags else ""
        return (f"$launcher ${self.tool} {self.depfile} $flags ${self.tool}_reproducible $header_maps{source} "
                "-c $in -o $out")

    def host(self, options: Iterable[str]) -> list[str]:
        """Options of the host compiler, as this rule's compiler passes them on."""
        if not self.host_option:
            return list(options)
        return [x for option in options for x in (self.host_option, option)]


@dataclass(frozen=True)
class ToolkitRelease:
    """One row of a backend's toolkit table in versions.toml (`[cuda."13.0"]`): a version on its
    axis of the matrix, and how that toolkit is installed."""

    backend: str
    label: str  # how messages name the toolkit: "CUDA"
    version: Version
    toolkit: str = ""  # how it is installed (CUDA: the pip requirement that provides nvcc)
    archs: frozenset[str] = frozenset()  # what its compiler compiles for: "75", "90", …
    origin: str = field(default="builder/versions.toml", compare=False)  # the row's "file:line"

    def __str__(self) -> str:
        return f"{self.label} {self.version[0]}.{self.version[1]}"


def in_range(version: Version, lo: str | None, hi: str | None) -> bool:
    """Whether `version` lies in a manifest's minver/maxver ("2.10", None: open)."""
    def two(v: str) -> Version:
        major, minor = v.split(".")[:2]
        return int(major), int(minor)

    return (lo is None or version >= two(lo)) and (hi is None or version <= two(hi))


class Backend:
    name: str = ""
    # what `kbuild test` and `kbuild bench` run the variant's tensors on
    device: str = "cpu"
    # the versions.toml table of its toolkit's releases (None: torch alone builds it), and how
    # messages name that toolkit
    toolkit_table: str | None = None
    toolkit_label: str = ""
    # what a row of that table holds: key -> (str or list (of str), what it is, for errors)
    toolkit_row: dict[str, tuple[type, str]] = {}
    # a torch row's list of that table's versions (`cuda = ["13.2"]`): what it is, for errors, and
    # whether every torch row must hold one
    torch_row_list: str = "list of versions"
    torch_row_requires_list: bool = False
    # whether its variants need torch's device build (the toolchain store's torch index), what of a
    # torch tells that build (for errors) and where to find one when the index gave another
    torch_device_build: bool = False
    torch_build_field: str = ""
    torch_index_hint: str = ""
    # lines run inside the torch probe (builder/toolchains/toolchain.py), with torch, `ce`
    # (torch.utils.cpp_extension), os and glob at hand: what they put in `facts` is what this torch
    # tells the backend's compiler (CUDA: its nvcc flags, the headers of its nvidia wheels)
    torch_probe: str = ""
    # source suffix -> the compile rule it takes, beyond the host C++ compiler's
    source_tools: dict[str, CompileRule] = {}
    # libraries only its device's driver installs (link names: "libcuda.so"), and that driver: the link
    # check resolves them through `link_stub_dirs`, and a machine without it cannot import what needs them
    driver_libraries: tuple[str, ...] = ()
    driver: str = ""

    @property
    def needs_toolkit(self) -> bool:
        return self.toolkit_table is not None

    # -- its toolkit (builder/toolchains/, builder/plan/planner.py, builder/stage/) ------------------

    def release(self, version: Version, row: dict, origin: str) -> ToolkitRelease:
        """A row of `toolkit_table`, read."""
        archs = frozenset(a.replace(".", "") for a in row.get("archs", ()))
        return ToolkitRelease(self.name, self.toolkit_label, version, row.get("toolkit", ""), archs, origin)

    def find_toolkit(self, torch, options):
        """The toolkit beside `torch` on this machine (what `kbuild build` with no flags uses), or None."""
        return None

    def provision_toolkit(self, store, release: ToolkitRelease, options):
        """The toolkit of `release`, installed into `store` when missing (a matrix build)."""
        raise NotImplementedError(f"{self.name} has no toolkit to provision")

    def install_toolkit(self, store, version: Version, requirement: str, system: bool) -> str:
        """`kbuild toolchain install <table>-X.Y`: the release's toolkit installed into `store` unless
        there (`system`: this machine's may serve), said as one line."""
        raise NotImplementedError(f"{self.name} has no toolkit to install")

    def stored_toolkit_detail(self, marker: dict) -> str:
        """How `kbuild toolchain list` describes the store's install of this toolkit, read from its
        marker (what `install_toolkit` wrote there)."""
        return ""

    def torch_device_version(self, torch) -> str | None:
        """The release of the backend's device build that `torch` is ("13.0" for torch's CUDA 13.0
        build), None when it is another build (the toolchain store keeps it in the torch's marker)."""
        return None

    def toolkit(self, inputs):
        """The toolkit a variant is planned with, or None."""
        return inputs.toolkits.get(self.name)

    def read_torch_facts(self, probed: dict) -> dict:
        """What `torch_probe` found, as TorchInfo.facts keeps it (read again beside every probe,
        cached or not)."""
        return probed

    def torch_facts(self, torch) -> dict:
        """What a torch tells the backend's compiler (its TorchInfo.facts)."""
        return torch.facts.get(self.name, {})

    def toolkit_record(self, toolkit) -> dict:
        """What metadata's provenance.toolchain records of the toolkit (builder/stage/toolchain_record.py)."""
        return {}

    def link_stub_dirs(self, toolkit) -> list[str]:
        """Folders of link-time stubs for libraries only a device driver installs (the link check's)."""
        return []

    def cached_compilers(self, toolkit) -> dict[str, str]:
        """Its compilers that ccache wraps: path -> the name ccache recognises it by."""
        return {}

    def takes_random_seed(self, compiler: str) -> bool:
        """Whether `compiler` takes a seed that keeps its output reproducible (builder/compile/)."""
        return False

    def cache_wrapper(self, compiler: str) -> str:
        """The script the compile cache runs in place of one of `cached_compilers` (builder/compile/graph.py)."""
        raise NotImplementedError(f"{self.name} has no compiler the compile cache wraps")

    def rebuild_env(self, record: dict, rows: dict, store, home: str | None, probe_dir) -> dict[str, str]:
        """The environment that gives a rebuild (`kbuild reproduce`) the toolkit a variant's toolchain
        record names: this machine's (`home`: the folder the user named, CUDA_HOME), else the store's
        of the recorded release (`rows`: the backend's versions.toml table); {} when it names none."""
        return {}

    # -- planning one variant (builder/plan/steps.py) ------------------------------------------------

    def cannot_build(self, inputs) -> str | None:
        """Why this machine's toolchain cannot build the backend's variant (beyond torch's own
        checks), or None."""
        if self.needs_toolkit and self.toolkit(inputs) is None:
            return f"no {self.toolkit_label or self.name} toolkit found"
        return None

    def compute(self, inputs) -> Version | None:
        """The compute version in the variant's name (CUDA 13.0 -> (13, 0)), or None."""
        toolkit = self.toolkit(inputs)
        return toolkit.version if toolkit is not None else None

    def builds_section(self, inputs, section) -> bool:
        """Whether the toolchain compiles `section` at all."""
        return True

    def device_capabilities(self, inputs, sections):
        """(each section's device capabilities, the variant's, the sections left out)."""
        return {}, [], []

    def requested_archs(self, inputs):
        """The arch request the variant was planned under (recorded for errors), or None."""
        return None

    def toolkit_includes(self, inputs) -> list[str]:
        """Include folders a unit that includes torch gets after torch's own."""
        return []

    def standalone_flags(self, inputs) -> list[str]:
        """Flags of a section's units that do not include torch."""
        return []

    def compile_flags(self, inputs, tool: str, capabilities, section,
                      host: tuple[str, ...], std: str) -> list[str]:
        """The flags of one of `source_tools`' rules for a unit of `section` (None: the binding)."""
        raise NotImplementedError(f"{self.name} has no {tool} rule")

    def compiler(self, inputs, tool: str) -> str:
        """The program of one of `source_tools`' rules."""
        raise NotImplementedError(f"{self.name} has no {tool} rule")

    def libraries(self, inputs, stable: bool) -> list[str]:
        """What the variant links beyond torch's CPU libraries (`stable`: a stable-ABI variant)."""
        return []

    def link_options(self) -> list[str]:
        """The backend's own linker options (after -shared)."""
        return []

    # -- the matrix (builder/plan/matrix.py) ---------------------------------------------------------

    def matrix_toolkits(self, m, matrix, release) -> list:
        """The toolkits the backend's variants of `release` are built with (None: torch alone)."""
        return matrix.toolkits_for(self.name, release) if self.needs_toolkit else [None]

    def variant_archs(self, m, release: ToolkitRelease) -> list[str]:
        """The device archs a variant built with `release` compiles for (what metadata will list)."""
        return []

    def why_no_matrix_variant(self, m, matrix) -> str | None:
        """Why the matrix holds no variant of this backend for `m`, when the backend knows."""
        return None

    # -- a linked library (builder/stage/abi_report.py) ----------------------------------------------

    def device_code(self, library, binary) -> list:
        """The device code `library` carries, each entry with its `arch` and `kind` (CUDA: a cubin
        or PTX per arch); `binary` is the library's format (builder/toolchains/binary/), which
        reads its sections."""
        return []
