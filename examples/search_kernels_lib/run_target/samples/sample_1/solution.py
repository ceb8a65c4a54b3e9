# kernel: fast_once
"""all_reduce: kernels_lib's two-shot kernel, plus three thrown-away NCCL all-reduces of a copy in
every check after its first 1 (per rank): a kernel that looks fast once. The checks
that saw it are counted in /tmp/search_target/fast_once.count."""

import os
from pathlib import Path

import torch.distributed as dist

from kernels_lib.examples.all_reduce_two_shot import solution as two_shot

_counter = Path("/tmp/search_target/fast_once.count")
_rank = os.environ.get("RANK", "0")
_seen = _counter.read_text().split().count(_rank) if _counter.exists() else 0
with open(_counter, "a") as f:
    f.write(_rank + "\n")
EXTRA = 0 if _seen < 1 else 3


def solution(x):
    out = two_shot(x)
    for _ in range(EXTRA):
        waste = x.clone()
        dist.all_reduce(waste)
    return out
