# An honest all-reduce that reads a value back to the host on every call (a sync), which CUDA
# graph capture forbids: the checker must time it call by call and still call it correct.
import torch.distributed as dist


def solution(x):
    out = x.clone()
    dist.all_reduce(out)
    if out.is_cuda and float(out.view(-1)[0].item()) != float(out.view(-1)[0].item()):  # NaN only
        out.zero_()
    return out
