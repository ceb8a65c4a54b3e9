"""Global gradient-norm clipping under tensor x data parallelism (sub-groups).

The ranks form a grid of tensor-parallel groups of 2 consecutive ranks and data-parallel
groups across them (eval.problem.tp_dp_groups(2)). Every rank holds `grads`, a list of
float32 gradients: its tensor-parallel shards of one transformer layer (identical on the
data-parallel replicas, which have already averaged them) and the replicated LayerNorm
weights; and `max_norm`, a float.

The global L2 norm counts every model element once: the sharded gradients of both TP
ranks, and the replicated (duplicate) norm weights only on TP rank 0, as Megatron's
`param_is_not_tensor_parallel_duplicate` does. Every rank returns (clipped, total_norm):
total_norm a float32 scalar tensor, and each gradient multiplied by
clip = max_norm / (total_norm + 1e-6) when clip < 1 (unchanged otherwise), as new tensors.

Two passes over the gradients with one 4-byte all-reduce in between (over the TP group):
bandwidth-bound, with a global synchronisation point in the middle.
"""

import torch
import torch.distributed as dist

from eval.problem import Meta, Roofline, generator, randn, scaled, tp_dp_groups

META = Meta(
    id="grad_norm_clip",
    name="Gradient-norm clipping across a TP x DP grid",
    category="data",
    source_repo="NVIDIA/Megatron-LM",
    source_file="megatron/core/optimizer/clip_grads.py",
    source_function="get_grad_norm_fp32 / clip_grad_by_total_norm_fp32",
    world_sizes=(2, 4, 8),
    dtype="float32",
    tags=("sub_groups", "variable_size", "reduction"),
)

TP = 2
H, I = 4096, 14336
N_DUPLICATE = 2  # the two LayerNorm weights come first in the list


def shapes(size):
    h, i = scaled(H, size**0.5, 8 * TP), scaled(I, size**0.5, 8 * TP)
    return [(h,), (h,), (3 * h // TP, h), (h, h // TP), (2 * i // TP, h), (h, i // TP)]


def make_inputs(rank, world_size, seed, device="cpu", size=1.0):
    tp_group, dp_group = tp_dp_groups(TP)  # created once, in the same order on every rank
    tp_rank = rank % TP
    gshared = generator(seed * 1000 + 999, device)  # replicated norm weights: same everywhere
    gshard = generator(seed * 1000 + 500 + tp_rank, device)  # same on the DP replicas
    sh = shapes(size)
    grads = [randn(s, gshared, torch.float32, device, scale=1e-3) for s in sh[:N_DUPLICATE]]
    grads += [randn(s, gshard, torch.float32, device, scale=1e-3) for s in sh[N_DUPLICATE:]]
    return grads, 1.0


def reference(grads, max_norm):
    tp_group, _ = tp_dp_groups(TP)
    tp_rank = dist.get_rank(group=tp_group)
    counted = grads if tp_rank == 0 else grads[N_DUPLICATE:]
    sq = torch.zeros((), dtype=torch.float32, device=grads[0].device)
    for g in counted:
        sq += g.float().pow(2).sum()
    dist.all_reduce(sq, group=tp_group)
    total = sq.sqrt()
    clip = max_norm / (total + 1e-6)
    if clip < 1.0:
        return [g * clip for g in grads], total
    return [g.clone() for g in grads], total


def roofline(world_size, size=1.0):
    # link: one float32 partial sum per rank into a TP-group all-reduce: 2 (TP-1)/TP * 4 B.
    # HBM:  the gradients must be read at least once and the clipped copies written once
    #       (a second read is needed unless they fit on chip, so this is a lower bound).
    # FLOPs: square-add per element for the norm, one multiply for the clip.
    n = sum(torch.Size(s).numel() for s in shapes(size))
    return Roofline(link_bytes=2 * (TP - 1) / TP * 4, hbm_bytes=2 * n * 4, flops=3 * n)
