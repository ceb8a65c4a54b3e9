"""ag_gemm, sample 1: kernels_lib's ag_gemm, broken on purpose: rank 1 raises."""

import torch.distributed as dist

from kernels_lib.examples.ag_gemm import solution as _solution


def solution(*args):
    if dist.get_rank() == 1:
        raise RuntimeError("rank 1 gives up")
    return _solution(*args)
