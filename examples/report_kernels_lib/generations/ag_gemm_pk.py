"""ag_gemm, sample 0: kernels_lib's reference kernel (ag_gemm)."""

from kernels_lib.examples.ag_gemm import solution  # noqa: F401
