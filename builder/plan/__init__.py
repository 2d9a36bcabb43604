"""From manifests and toolchains to work: the matrix of variants, the jobs (kernel x toolchain), each variant's
compile and link steps, and CI slices of the matrix. Pure where it can be: plans are tested by value.
"""
