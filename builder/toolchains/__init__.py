"""What compiles a variant: the torch and nvcc found here or provisioned into the toolchain store, CUTLASS headers,
and glibc sysroots (with their link stubs) for manylinux builds.
"""
