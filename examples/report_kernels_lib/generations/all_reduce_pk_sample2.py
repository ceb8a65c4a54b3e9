"""all_reduce, sample 2: kernels_lib's all_reduce_one_shot, broken on purpose: every output element off by one."""

import torch
from torch.utils._pytree import tree_map

from kernels_lib.examples.all_reduce_one_shot import solution as _solution


def solution(*args):
    return tree_map(lambda t: t + 1 if isinstance(t, torch.Tensor) and t.is_floating_point() else t, _solution(*args))
