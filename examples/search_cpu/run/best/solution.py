# kernel: sleep_8
"""all_reduce: the reference plus a deliberate 8 ms sleep per call (correct, slow on purpose)."""

import time

import torch.distributed as dist

DELAY_S = 0.008


def solution(x):
    time.sleep(DELAY_S)
    out = x.clone()
    dist.all_reduce(out)
    return out
