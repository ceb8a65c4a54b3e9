# kernel: reference
"""all_reduce: the reference itself (correct, speedup about 1)."""
import time

import torch.distributed as dist

DELAY_S = 0.0


def solution(x):
    time.sleep(DELAY_S)
    out = x.clone()
    dist.all_reduce(out)
    return out
