"""reduce_scatter, sample 1: kernels_lib's reduce_scatter, broken on purpose: a Python syntax error."""

from kernels_lib.examples.reduce_scatter import solution as _solution


def solution(*args)
    return _solution(*args)
