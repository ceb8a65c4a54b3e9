"""ZeRO-2 optimizer step: reduce-scatter gradients, AdamW on the owned shard, all-gather params.

Every rank holds the flat bf16 gradient of the whole model from its own micro-batch, `grad`
(N), and the optimizer state of its own 1/W of the parameters: `master` (fp32 master weights,
N/W), `exp_avg` and `exp_avg_sq` (fp32, N/W), for elements [r*N/W, (r+1)*N/W); `step` is the
step number after this update (an int >= 1). Every rank returns

    (params, master', exp_avg', exp_avg_sq')

- g = (sum over ranks of grad, accumulated in float32) / W, on the owned shard;
- AdamW with lr = 1e-4, betas = (0.9, 0.95), eps = 1e-8, weight_decay = 0.1 (decoupled):
  m' = b1 m + (1-b1) g;  v' = b2 v + (1-b2) g^2;
  p' = p (1 - lr wd) - lr * (m' / (1-b1^step)) / (sqrt(v' / (1-b2^step)) + eps);
- params: the bf16 copy of ALL N updated parameters, gathered from every rank's shard
  (bf16 of master').

The state outputs are new tensors (DeepSpeed updates them in place; here they are returned).
"""

import torch
import torch.distributed as dist

from eval.problem import Meta, Roofline, generator, randn, scaled

META = Meta(
    id="zero2_adamw_step",
    name="ZeRO-2 step: gradient reduce-scatter, sharded AdamW, parameter all-gather",
    category="fsdp",
    source_repo="deepspeedai/DeepSpeed",
    source_file="deepspeed/runtime/zero/stage_1_and_2.py",
    source_function="DeepSpeedZeroOptimizer.step (reduce_scatter gradients, all_gather_dp_groups)",
    world_sizes=(2, 4, 8),
    tags=("optimizer", "reduce_scatter", "all_gather"),
)

N = 128 * 2**20
LR, B1, B2, EPS, WD = 1e-4, 0.9, 0.95, 1e-8, 0.1


def _n(world_size, size):
    return scaled(N, size, 1024 * world_size)


def optimizer_state(rank, world_size, seed, device, n):
    g = generator(seed * 1000 + 500 + rank, device)
    master = randn((n,), g, torch.float32, device, scale=0.02)
    exp_avg = randn((n,), g, torch.float32, device, scale=1e-3)
    exp_avg_sq = randn((n,), g, torch.float32, device, scale=1e-3).square_().add_(1e-8)
    return master, exp_avg, exp_avg_sq


def make_inputs(rank, world_size, seed, device="cpu", size=1.0):
    n = _n(world_size, size)
    g = generator(seed * 1000 + rank, device)
    grad = randn((n,), g, torch.bfloat16, device, scale=1e-2)
    return (grad, *optimizer_state(rank, world_size, seed, device, n // world_size), 10)


def adamw(p, m, v, g, step):
    """One decoupled-weight-decay Adam update in float32; returns new (p, m, v)."""
    m = m * B1 + g * (1 - B1)
    v = v * B2 + g * g * (1 - B2)
    denom = (v / (1 - B2**step)).sqrt() + EPS
    p = p * (1 - LR * WD) - LR * (m / (1 - B1**step)) / denom
    return p, m, v


def reference(grad, master, exp_avg, exp_avg_sq, step):
    w = dist.get_world_size()
    shard = torch.empty_like(master)
    dist.reduce_scatter_tensor(shard, grad.float())
    p, m, v = adamw(master, exp_avg, exp_avg_sq, shard / w, step)
    params = torch.empty(grad.shape, dtype=torch.bfloat16, device=grad.device)
    dist.all_gather_into_tensor(params, p.to(torch.bfloat16))
    return params, p, m, v


def roofline(world_size, size=1.0):
    # link: out of a rank must go the gradient elements owned elsewhere (bf16 is exact):
    #       (W-1)/W N 2 B, and its own updated parameters, which only it can compute, at least
    #       once: N/W 2 B; total 2N B. Into it, symmetrically, the others' parameters and at
    #       least 2 B per owned element of gradient information: 2N B. So 2N B per direction.
    # HBM:  read grad (N bf16), read and write master, exp_avg, exp_avg_sq (N/W fp32 each),
    #       write params (N bf16).
    # FLOPs: about 15 per owned element (the update) plus one add per received gradient.
    n = _n(world_size, size)
    w = world_size
    return Roofline(
        link_bytes=2 * n,
        hbm_bytes=n * 2 + 6 * n // w * 4 + n * 2,
        flops=15 * n / w + (w - 1) / w * n,
    )
