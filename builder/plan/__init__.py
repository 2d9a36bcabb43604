"""From manifests and toolchains to work: the matrix of variants, the jobs (kernel x toolchain), each variant's
compile and link steps, and CI slices of the matrix. Pure where it can be: plans are tested by value.
"""

from builder.exports import lazy_exports

__all__, __getattr__ = lazy_exports(__name__, planner=("plan_kernels",),
                                   matrix=("Target", "load_table", "matrix_variants", "select", "variant_archs"))
