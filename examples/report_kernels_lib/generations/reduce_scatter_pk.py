"""reduce_scatter, sample 0: kernels_lib's reference kernel (reduce_scatter)."""

from kernels_lib.examples.reduce_scatter import solution  # noqa: F401
