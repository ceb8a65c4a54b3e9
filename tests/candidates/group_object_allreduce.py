# Communicates through the process-group object rather than torch.distributed's functions:
# still counted among the collectives.
import torch.distributed as dist


def solution(x):
    out = x.clone()
    dist.group.WORLD.allreduce([out]).wait()
    return out
