"""all_to_all, sample 0: kernels_lib's reference kernel (all_to_all)."""

from kernels_lib.examples.all_to_all import solution  # noqa: F401
