"""gemm_rs, sample 0: kernels_lib's reference kernel (gemm_rs)."""

from kernels_lib.examples.gemm_rs import solution  # noqa: F401
