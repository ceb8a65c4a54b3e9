"""gemm_rs, sample 1: kernels_lib's gemm_rs, broken on purpose: every output element off by one."""

import torch
from torch.utils._pytree import tree_map

from kernels_lib.examples.gemm_rs import solution as _solution


def solution(*args):
    return tree_map(lambda t: t + 1 if isinstance(t, torch.Tensor) and t.is_floating_point() else t, _solution(*args))
