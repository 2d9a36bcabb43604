"""What compiles a variant: the torch and nvcc found here or provisioned into the toolchain store, CUTLASS headers,
and glibc sysroots (with their link stubs) for manylinux builds.
"""

from builder.exports import lazy_exports

__all__, __getattr__ = lazy_exports(__name__, binary=("for_os",), provision=("ToolchainStore",),
                                   toolchain=("probe_torch",), versions=("load_versions_table",))
