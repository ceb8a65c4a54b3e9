import torch.distributed as dist


def solution(x):
    out = x.clone()
    dist.all_reduce(out)
    return out
