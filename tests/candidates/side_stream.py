# Does its work on a side stream and returns without making the caller's stream wait, so that
# a timer recording events on the current stream only would see almost nothing. (On CPU there
# are no streams and this is an honest candidate.)
import torch
import torch.distributed as dist

_stream = []


def solution(x):
    if not x.is_cuda:
        out = x.clone()
        dist.all_reduce(out)
        return out
    if not _stream:
        _stream.append(torch.cuda.Stream())
    s = _stream[0]
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        out = x.clone()
        for _ in range(20):  # slow work, hidden from the current stream
            out.mul_(1.0)
        dist.all_reduce(out)
    return out
