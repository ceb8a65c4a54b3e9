# Right on most calls, wrong on a random 15 % of them on rank 1 only (a race between GPUs as a
# checker sees it: the same inputs, a different answer now and then).
import random

import torch.distributed as dist


def solution(x):
    out = x.clone()
    dist.all_reduce(out)
    if dist.get_rank() == 1 and random.random() < 0.15:
        out.view(-1)[random.randrange(out.numel())] += 1
    return out
