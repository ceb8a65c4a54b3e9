"""RMSNorm over a hidden dimension sharded across tensor-parallel ranks.

Every rank holds `x` (T x H/W bf16: its shard of the hidden dimension of T tokens) and
`weight` (H/W bf16, its shard of the norm's scale). Every rank returns its shard of
RMSNorm(x) over the FULL hidden dimension:

    out = (x * rsqrt(mean_over_all_H(x^2) + eps)) * weight,   eps = 1e-6,

computed in float32 and cast to bf16. The mean of squares needs a T-element float32
all-reduce (each rank sums its own squares, the reduced sum divided by H). As in MiniMax-
Text-01's linear-attention output norm in vLLM; the communication is small and latency-bound,
the rest is a bandwidth-bound pass over x.
"""

import torch
import torch.distributed as dist

from eval.problem import Meta, Roofline, generator, randn, scaled

META = Meta(
    id="tp_rmsnorm",
    name="Tensor-parallel RMSNorm (sharded hidden dimension)",
    category="tensor",
    source_repo="vllm-project/vllm",
    source_file="vllm/model_executor/models/minimax_text_01.py",
    source_function="MiniMaxText01RMSNormTP.forward",
    world_sizes=(2, 4, 8),
    tags=("norm", "latency"),
)

T, H = 32768, 8192
EPS = 1e-6


def _dims(world_size, size):
    f = size**0.5
    return scaled(T, f, 16), scaled(H, f, 64 * world_size)


def make_inputs(rank, world_size, seed, device="cpu", size=1.0):
    t, h = _dims(world_size, size)
    g = generator(seed * 1000 + rank, device)
    x = randn((t, h // world_size), g, torch.bfloat16, device)
    weight = (1.0 + randn((h // world_size,), g, torch.float32, device, scale=0.1)).to(torch.bfloat16)
    return x, weight


def reference(x, weight):
    h = x.shape[-1] * dist.get_world_size()
    xf = x.float()
    sq = xf.pow(2).sum(-1)  # (T,) float32: this rank's part of the sum of squares
    dist.all_reduce(sq)
    inv = torch.rsqrt(sq / h + EPS)
    return (xf * inv[:, None] * weight.float()).to(torch.bfloat16)


def roofline(world_size, size=1.0):
    # link: one T-element fp32 all-reduce, 2 (W-1)/W of 4 T bytes.
    # HBM:  read the x shard and the weight shard, write the output shard.
    # FLOPs: square-add per element, then scale by two factors: about 4 per element.
    t, h = _dims(world_size, size)
    w = world_size
    return Roofline(
        link_bytes=2 * (w - 1) / w * t * 4,
        hbm_bytes=(2 * t * h // w + h // w) * 2,
        flops=4 * t * h / w,
    )
