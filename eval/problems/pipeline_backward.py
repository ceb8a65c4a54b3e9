"""Pipeline-parallel backward over micro-batches: gradients flow from the last stage to the first.

Stage r computes y = x + gelu(x @ weight + bias) (tanh GELU) on its input x, as in
pipeline_forward. For the backward pass every rank holds its stage's saved inputs of all
micro-batches `x` (NMB x Tmb x H bf16), `weight` (H x H bf16) and `bias` (H bf16); the LAST
rank also holds the loss gradient of its outputs `grad_y` (NMB x Tmb x H bf16; the other ranks
get an empty (0 x Tmb x H) tensor). For each micro-batch, stage r receives dL/dy from rank
r+1 (the last rank: `grad_y`), computes dL/dx (bf16 autograd through the stage) and sends it
to rank r-1, and accumulates its parameter gradients over the micro-batches in float32
(dW += x.T @ dZ and db += sum dZ with dZ = dL/d(x @ weight + bias), products in float32).

Every rank returns {"grad_weight": (H x H float32), "grad_bias": (H float32)}; rank 0 also
returns "grad_input": the (NMB x Tmb x H) bf16 gradient of its inputs.
"""

import torch
import torch.distributed as dist
import torch.nn.functional as F

from eval.problem import Meta, Roofline, generator, randn, scaled

META = Meta(
    id="pipeline_backward",
    name="Pipeline backward: stage-boundary gradient send/recv over micro-batches",
    category="pipeline",
    source_repo="NVIDIA/Megatron-LM",
    source_file="megatron/core/pipeline_parallel/schedules.py",
    source_function="backward_step (with p2p_communication.send_backward/recv_backward)",
    world_sizes=(2, 4, 8),
    atol=2e-2,
    rtol=2e-2,  # the weight gradient sums bf16 products over NMB * Tmb rows
    tags=("p2p", "backward", "gemm"),
)

NMB, TMB, H = 8, 4096, 4096


def _dims(size):
    f = size ** (1 / 3)
    return max(2, int(NMB * f)), scaled(TMB, f, 16), scaled(H, f, 64)


def make_inputs(rank, world_size, seed, device="cpu", size=1.0):
    nmb, t, h = _dims(size)
    g = generator(seed * 1000 + rank, device)
    x = randn((nmb, t, h), g, torch.bfloat16, device)
    weight = randn((h, h), g, torch.bfloat16, device, scale=h**-0.5)
    bias = randn((h,), g, torch.bfloat16, device, scale=0.1)
    grad_y = randn((nmb if rank == world_size - 1 else 0, t, h), g, torch.bfloat16, device, scale=0.1)
    return x, weight, bias, grad_y


def reference(x, weight, bias, grad_y):
    rank, w = dist.get_rank(), dist.get_world_size()
    nmb = x.shape[0]
    gw = torch.zeros(weight.shape, dtype=torch.float32, device=x.device)
    gb = torch.zeros(bias.shape, dtype=torch.float32, device=x.device)
    grad_inputs, pending = [], []
    for i in range(nmb):
        if rank == w - 1:
            gy = grad_y[i]
        else:
            gy = torch.empty_like(x[i])
            dist.recv(gy, rank + 1)
        with torch.enable_grad():
            xi = x[i].detach().requires_grad_(True)
            z = xi @ weight + bias  # bf16, as the forward computed it
            y = xi + F.gelu(z, approximate="tanh")
            gx, gz = torch.autograd.grad(y, (xi, z), gy)
        gw += xi.detach().float().t() @ gz.float()  # weight gradient accumulated in float32
        gb += gz.float().sum(dim=0)
        if rank > 0:
            pending.append(dist.isend(gx, rank - 1))
        else:
            grad_inputs.append(gx)
    for p in pending:
        p.wait()
    out = {"grad_weight": gw, "grad_bias": gb}
    if rank == 0:
        out["grad_input"] = torch.stack(grad_inputs)
    return out


def roofline(world_size, size=1.0):
    # link: a middle stage receives and sends one activation gradient per micro-batch:
    #       NMB Tmb H bf16 per direction.
    # HBM:  read x, the incoming gradients and the weight; write the outgoing gradients and
    #       the fp32 weight gradient.
    # FLOPs: per micro-batch the pre-activation (x @ W, not saved), dX = dZ @ W.T and
    #        dW = x.T @ dZ: three GEMMs of 2 Tmb H^2.
    nmb, t, h = _dims(size)
    return Roofline(
        link_bytes=nmb * t * h * 2,
        hbm_bytes=3 * nmb * t * h * 2 + h * h * 2 + h * h * 4,
        flops=6 * nmb * t * h * h,
    )
