# kernel: sleep_64
"""all_reduce: the reference plus a deliberate 64 ms sleep per call (correct, slow on purpose)."""
import time

import torch.distributed as dist

DELAY_S = 0.064


def solution(x):
    time.sleep(DELAY_S)
    out = x.clone()
    dist.all_reduce(out)
    return out
