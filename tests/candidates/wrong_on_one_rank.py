# Right shape and dtype everywhere, wrong values on the last rank only.
import torch.distributed as dist


def solution(x):
    out = x.clone()
    dist.all_reduce(out)
    if dist.get_rank() == dist.get_world_size() - 1:
        out[len(out) // 2] += 1.0
    return out
