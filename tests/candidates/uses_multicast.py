# Mentions an NVLink multicast instruction: must be refused where multicast is disabled.
import torch.distributed as dist

PTX = "multimem.ld_reduce.relaxed.sys.global.add.bf16x2 %0, [%1];"


def solution(x):
    out = x.clone()
    dist.all_reduce(out)
    return out
