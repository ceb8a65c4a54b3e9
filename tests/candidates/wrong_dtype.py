import torch.distributed as dist


def solution(x):
    out = x.float()
    dist.all_reduce(out)
    return out
