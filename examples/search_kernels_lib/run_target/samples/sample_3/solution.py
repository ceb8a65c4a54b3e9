# kernel: nccl
"""all_reduce: the reference itself, NCCL's all-reduce (correct, speedup about 1)."""

import torch.distributed as dist


def solution(x):
    out = x.clone()
    dist.all_reduce(out)
    return out
