"""What every compiled backend answers: the interface the planner, the matrix and the checks ask.

The defaults are a host-only backend's (CPU): nothing beyond torch to find, no device code, no
archs, no toolkit. A backend with a device toolkit overrides what differs (builder/backends/cuda.py).
Backends lie below every stage that asks them, so they import none: `inputs` is builder/plan/steps.py's
PlanInputs (the manifest, torch, the toolkit, the requested archs), `section` a manifest's KernelSection,
`m` a Manifest, `matrix` and `release` builder/plan/matrix.py's Matrix and TorchRelease, `torch` a
toolchain's TorchInfo.
"""

from __future__ import annotations

Version = tuple[int, int]


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
    # whether its variants need a device toolkit (nvcc) beside torch
    needs_toolkit: bool = False
    # source suffix -> the compile rule it takes, beyond the host C++ compiler's
    source_tools: dict[str, str] = {}

    # -- planning one variant (builder/plan/steps.py) ------------------------------------------------

    def cannot_build(self, inputs) -> str | None:
        """Why this machine's toolchain cannot build the backend's variant (beyond torch's own
        checks), or None."""
        return None

    def compute(self, inputs) -> Version | None:
        """The compute version in the variant's name (CUDA 13.0 -> (13, 0)), or None."""
        return None

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
        return [None]

    def why_no_matrix_variant(self, m, matrix) -> str | None:
        """Why the matrix holds no variant of this backend for `m`, when the backend knows."""
        return None
