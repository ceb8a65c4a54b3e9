"""All-reduce (sum), the kernel chosen by size: the one-shot (all_reduce_one_shot.py: one hop,
reducers read W copies) for messages under PK_AR_TWO_SHOT_BYTES bytes per rank, the two-shot
(all_reduce_two_shot.py: reduce-scatter then all-gather, 2 (W-1)/W * n link bytes, more
overlap) from there on. Default 4 MiB: measured on two H200s, the one-shot won at 1 MiB (14.8
against 16.2 us) and the two-shot at 16 MiB and more (68 against 87 us at 16 MiB). Sizes the
two-shot cannot split (numel not a multiple of 8 * world) go to the one-shot.
Candidate for eval/problems/all_reduce.py."""

import os

import torch

from kernels_lib.examples import all_reduce_one_shot, all_reduce_two_shot
from kernels_lib.examples._common import world

TWO_SHOT_BYTES = int(os.environ.get("PK_AR_TWO_SHOT_BYTES", 4 << 20))


def solution(x: torch.Tensor) -> torch.Tensor:
    rank, w = world()
    if x.numel() * x.element_size() >= TWO_SHOT_BYTES and x.numel() % (8 * w) == 0:
        return all_reduce_two_shot.solution(x)
    return all_reduce_one_shot.solution(x)
