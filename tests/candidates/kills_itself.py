# Rank 1 kills its own process in the second call.
import os
import signal

import torch.distributed as dist

_calls = [0]


def solution(x):
    _calls[0] += 1
    if dist.get_rank() == 1 and _calls[0] == 2:
        os.kill(os.getpid(), signal.SIGKILL)
    out = x.clone()
    dist.all_reduce(out)
    return out
