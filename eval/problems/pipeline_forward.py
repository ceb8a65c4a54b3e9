"""Pipeline-parallel forward over micro-batches: each rank is one stage, activations sent to the
next stage at every boundary.

Rank r holds stage r's weight `weight` (H x H bf16) and `bias` (H bf16); rank 0 also holds
the input micro-batches `x` (NMB x Tmb x H bf16; the other ranks get an empty (0 x Tmb x H)
tensor). Stage r computes y = x + gelu(x @ weight + bias) (tanh GELU, bf16) on each
micro-batch it receives from rank r-1 (rank 0: from `x`) and sends y to rank r+1. The LAST
rank returns the (NMB x Tmb x H) bf16 outputs of all micro-batches; the other ranks return
None.

Megatron's pipeline schedule (forward only) uses send_forward / recv_forward between stages;
a good implementation overlaps each stage's send with the next micro-batch's compute.
"""

import torch
import torch.distributed as dist
import torch.nn.functional as F

from eval.problem import Meta, Roofline, generator, randn, scaled

META = Meta(
    id="pipeline_forward",
    name="Pipeline forward: stage-boundary send/recv over micro-batches",
    category="pipeline",
    source_repo="NVIDIA/Megatron-LM",
    source_file="megatron/core/pipeline_parallel/schedules.py",
    source_function="forward_backward_pipelining_without_interleaving (forward_only; p2p_communication.send_forward/recv_forward)",
    world_sizes=(2, 4, 8),
    tags=("p2p", "overlap", "gemm"),
)

NMB, TMB, H = 8, 4096, 4096


def _dims(size):
    f = size ** (1 / 3)
    return max(2, int(NMB * f)), scaled(TMB, f, 16), scaled(H, f, 64)


def make_inputs(rank, world_size, seed, device="cpu", size=1.0):
    nmb, t, h = _dims(size)
    g = generator(seed * 1000 + rank, device)
    x = randn((nmb if rank == 0 else 0, t, h), g, torch.bfloat16, device)
    weight = randn((h, h), g, torch.bfloat16, device, scale=h**-0.5)
    bias = randn((h,), g, torch.bfloat16, device, scale=0.1)
    return x, weight, bias, nmb


def stage(x, weight, bias):
    return x + F.gelu(x @ weight + bias, approximate="tanh")


def reference(x, weight, bias, num_microbatches):
    rank, w = dist.get_rank(), dist.get_world_size()
    t, h = x.shape[1], x.shape[2]
    outs, pending = [], []
    for i in range(num_microbatches):
        if rank == 0:
            inp = x[i]
        else:
            inp = torch.empty((t, h), dtype=x.dtype, device=x.device)
            dist.recv(inp, rank - 1)
        y = stage(inp, weight, bias)
        if rank + 1 < w:
            pending.append(dist.isend(y, rank + 1))  # overlaps the next micro-batch
        else:
            outs.append(y)
    for p in pending:
        p.wait()
    return torch.stack(outs) if rank == w - 1 else None


def roofline(world_size, size=1.0):
    # link: a middle stage receives and sends every micro-batch's activations:
    #       NMB Tmb H bf16 per direction.
    # HBM:  read the weight and each input micro-batch, write each output micro-batch.
    # FLOPs: one Tmb x H x H GEMM per micro-batch (the GELU is negligible): 2 NMB Tmb H^2.
    nmb, t, h = _dims(size)
    return Roofline(
        link_bytes=nmb * t * h * 2,
        hbm_bytes=h * h * 2 + 2 * nmb * t * h * 2,
        flops=2 * nmb * t * h * h,
    )
