# Reduces in place into its input and returns it: right output, but the input is destroyed.
import torch.distributed as dist


def solution(x):
    dist.all_reduce(x)
    return x
