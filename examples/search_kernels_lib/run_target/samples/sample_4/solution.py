# kernel: nccl_extra_pass
"""all_reduce: NCCL (the reference) plus one more all-reduce of a copy, thrown away: correct,
twice the reference's link traffic (slow on purpose)."""

import torch.distributed as dist


def solution(x):
    out = x.clone()
    dist.all_reduce(out)
    waste = x.clone()
    dist.all_reduce(waste)
    return out
