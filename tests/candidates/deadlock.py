# Rank 0 enters an all-reduce that rank 1 never joins: a deadlock on every backend.
import time

import torch.distributed as dist


def solution(x):
    out = x.clone()
    if dist.get_rank() == 0:
        dist.all_reduce(out)
    else:
        while True:
            time.sleep(1)
    return out
