"""all_to_all, sample 1: kernels_lib's all_to_all, broken on purpose: imports a module that does not exist."""

from kernels_lib.examples.all_to_all_v2 import solution  # noqa: F401  (no such module)
