"""all_gather, sample 1: kernels_lib's all_gather, broken on purpose: rank 0 waits in a barrier rank 1 never enters (a deadlock)."""

import torch.distributed as dist

from kernels_lib.examples.all_gather import solution as _solution


def solution(*args):
    if dist.get_rank() == 0:
        dist.barrier()  # rank 1 never joins: the ranks wait on each other until the checker kills them
    return _solution(*args)
