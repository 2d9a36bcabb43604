"""From manifests and toolchains to work: the matrix of variants, the jobs (kernel x toolchain), each variant's
compile and link steps, and CI slices of the matrix. Pure where it can be: plans are tested by value.
"""

from typing import TYPE_CHECKING

from builder.exports import lazy_exports

if TYPE_CHECKING:  # mypy cannot see through __getattr__: the same names, which run time imports on first use
    from builder.plan.matrix import Target as Target
    from builder.plan.matrix import load_table as load_table
    from builder.plan.matrix import matrix_variants as matrix_variants
    from builder.plan.matrix import select as select
    from builder.plan.matrix import variant_archs as variant_archs
    from builder.plan.planner import plan_kernels as plan_kernels

__all__, __getattr__ = lazy_exports(__name__, planner=("plan_kernels",),
                                   matrix=("Target", "load_table", "matrix_variants", "select", "variant_archs"))
