"""What compiles a variant: the torch and nvcc found here or provisioned into the toolchain store, CUTLASS headers,
and glibc sysroots (with their link stubs) for manylinux builds.
"""

from typing import TYPE_CHECKING

from builder.exports import lazy_exports

if TYPE_CHECKING:  # mypy cannot see through __getattr__: the same names, which run time imports on first use
    from builder.toolchains.binary import for_os as for_os
    from builder.toolchains.provision import ToolchainStore as ToolchainStore
    from builder.toolchains.toolchain import probe_torch as probe_torch
    from builder.toolchains.versions import load_versions_table as load_versions_table

__all__, __getattr__ = lazy_exports(__name__, binary=("for_os",), provision=("ToolchainStore",),
                                   toolchain=("probe_torch",), versions=("load_versions_table",))
