"""Int8-quantised gradient reduce-scatter (ZeRO++ qgZ).

Every rank holds `grad` (N bf16, a flat gradient; chunk j of N/W elements belongs to rank j).
Each rank quantises every chunk it sends in blocks of G = 2048 consecutive elements:

    scale = max |x| over the block / 127          (float32; x taken as float32)
    q     = clamp(round_half_to_even(x / scale), -127, 127) as int8   (x / scale rounded
            correctly in float32, i.e. no fast-math reciprocal)

and ships q (int8) with the per-block scales (float32). Rank r returns its chunk of the
average: (sum over source ranks j of q_j * scale_j) / W, accumulated in float32 and cast to
bf16 (N/W elements). The chunk a rank keeps for itself is quantised too, so that every rank
computes the same function.

The result differs from an exact average by up to half a quantisation step per source; the
tolerance is tighter than that error, so a solution has to quantise as specified. The point
is to move 1 byte per element instead of 2 or 4.
"""

import torch
import torch.distributed as dist

from eval.problem import Meta, Roofline, generator, randn, scaled

META = Meta(
    id="zeropp_quantized_reduce_scatter",
    name="Int8 block-quantised reduce-scatter of gradients (ZeRO++ qgZ)",
    category="data",
    source_repo="deepspeedai/DeepSpeed",
    source_file="deepspeed/runtime/comm/coalesced_collectives.py",
    source_function="all_to_all_quant_reduce",
    world_sizes=(2, 4, 8),
    tags=("quantisation", "reduce_scatter", "low_precision"),
)

N = 128 * 2**20
G = 2048


def _n(world_size, size):
    return scaled(N, size, G * world_size)


def make_inputs(rank, world_size, seed, device="cpu", size=1.0):
    g = generator(seed * 1000 + rank, device)
    return (randn((_n(world_size, size),), g, torch.bfloat16, device),)


def quantize(x):
    """(…, G) float32 blocks -> int8 values and float32 scales (…, 1)."""
    scale = x.abs().amax(dim=-1, keepdim=True) / 127.0
    q = torch.round(x / scale).clamp_(-127, 127).to(torch.int8)
    return q, scale


def reference(grad):
    w = dist.get_world_size()
    blocks = grad.float().view(w, -1, G)  # chunk j (for rank j) in blocks of G
    q, scale = quantize(blocks)
    q_in, scale_in = torch.empty_like(q), torch.empty_like(scale)
    dist.all_to_all_single(q_in, q)
    dist.all_to_all_single(scale_in, scale)
    total = (q_in.float() * scale_in).sum(dim=0)
    return (total / w).reshape(-1).to(torch.bfloat16)


def roofline(world_size, size=1.0):
    # link: of every chunk owned by another rank, at least the int8 values and the fp32 block
    #       scales must leave: (W-1)/W * N * (1 + 4/G) bytes.
    # HBM:  read the bf16 gradient, write the N/W bf16 result (and read what arrived, 1 byte
    #       per element of the own chunk from each source: N/W * W * (1 + 4/G)).
    # FLOPs: about 4 per element to quantise, 2 per received element to dequantise-add.
    n = _n(world_size, size)
    w = world_size
    return Roofline(
        link_bytes=(w - 1) / w * n * (1 + 4 / G),
        hbm_bytes=n * 2 + n / w * 2 + n * (1 + 4 / G),
        flops=6 * n,
    )
