"""Context-parallel causal depthwise conv1d with a halo from the previous rank.

The sequence is split in contiguous slices over the ranks. Every rank holds `x` (B x T/W x C,
bf16, its tokens), and the replicated `weight` (C x K, K = 4) and `bias` (C). Every rank
returns its slice of

    y[b, t, c] = silu(bias[c] + sum_{i<K} weight[c, i] * x[b, t - (K-1) + i, c])   (bf16)

over the WHOLE sequence, with x = 0 before the first token. Tokens before the slice come from
the previous rank: each rank needs the last K-1 tokens of rank-1 (a halo), rank 0 pads with
zeros. The short convolution of Mamba / GatedDeltaNet layers in flash-linear-attention's
context-parallel path. Communication is tiny and latency-bound; the rest is one bandwidth-
bound pass over x.
"""

import torch
import torch.distributed as dist
import torch.nn.functional as F

from eval.problem import Meta, Roofline, generator, randn, scaled

META = Meta(
    id="cp_causal_conv1d",
    name="Context-parallel causal conv1d (halo from the previous rank)",
    category="context",
    source_repo="fla-org/flash-linear-attention",
    source_file="fla/modules/convolution.py",
    source_function="causal_conv1d (context parallel: conv_cp_send_recv_fwd)",
    world_sizes=(2, 4, 8),
    tags=("p2p", "halo", "latency"),
)

B, T, C, K = 2, 65536, 4096, 4


def _dims(world_size, size):
    f = size**0.5
    return B, scaled(T, f, 16 * world_size), scaled(C, f, 64)


def make_inputs(rank, world_size, seed, device="cpu", size=1.0):
    b, t, c = _dims(world_size, size)
    g = generator(seed * 1000 + rank, device)
    x = randn((b, t // world_size, c), g, torch.bfloat16, device)
    gw = generator(seed * 1000 + 999, device)
    weight = randn((c, K), gw, torch.bfloat16, device, scale=0.5)
    bias = randn((c,), gw, torch.bfloat16, device, scale=0.1)
    return x, weight, bias


def reference(x, weight, bias):
    rank, w = dist.get_rank(), dist.get_world_size()
    b, tl, c = x.shape
    halo = torch.zeros((b, K - 1, c), dtype=x.dtype, device=x.device)
    ops = []
    if rank + 1 < w:
        ops.append(dist.P2POp(dist.isend, x[:, tl - (K - 1) :].contiguous(), rank + 1))
    if rank > 0:
        ops.append(dist.P2POp(dist.irecv, halo, rank - 1))
    if ops:
        for r in dist.batch_isend_irecv(ops):
            r.wait()
    xx = torch.cat([halo, x], dim=1).float().transpose(1, 2)  # (B, C, K-1+T/W)
    y = F.conv1d(xx, weight.float()[:, None, :], bias.float(), groups=c)
    return F.silu(y).transpose(1, 2).to(torch.bfloat16)


def roofline(world_size, size=1.0):
    # link: a middle rank receives K-1 tokens of B x C bf16 from rank-1 (and sends as many).
    # HBM:  read x and write y (B x T/W x C bf16 each), plus the small weight and bias.
    # FLOPs: K multiply-adds per output element plus the activation: about 2K + 4.
    b, t, c = _dims(world_size, size)
    w = world_size
    return Roofline(
        link_bytes=(K - 1) * b * c * 2,
        hbm_bytes=2 * b * t // w * c * 2 + c * (K + 1) * 2,
        flops=(2 * K + 4) * b * t / w * c,
    )
