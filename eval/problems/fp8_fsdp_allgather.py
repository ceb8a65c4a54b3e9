"""FSDP float8 all-gather: global amax per weight, cast the shard to float8 e4m3, gather 1 byte
per element.

Every rank holds its dim-0 shards of four weights of a transformer block, `shards`, a list of
bf16 tensors of shapes (3H/W x H), (H/W x H), (2I/W x H) and (H/W x I). For each weight:

    amax  = max |w| over the WHOLE weight (all ranks' shards), as float32
    scale = 448 / max(amax, 1e-12)                     (float32; 448 = e4m3 max)
    w8    = (w.float() * scale).clamp(-448, 448) cast to torch.float8_e4m3fn (round to nearest even)

Every rank returns (weights, scales): weights a list of the four full float8 weights
(shards gathered in rank order), scales a float32 tensor of the four scales.

As torchao's precompute_float8_dynamic_scale_for_fsdp (one all-reduce of the amaxes) and
WeightWithDynamicFloat8CastTensor.fsdp_pre_all_gather (cast before the all-gather), so the
links carry 1 byte per element instead of 2. The CPU path moves the float8 bytes as uint8
(gloo has no float8 type); NCCL does the same, so the paths do not differ.
"""

import torch
import torch.distributed as dist

from eval.problem import Meta, Roofline, generator, randn, scaled

META = Meta(
    id="fp8_fsdp_allgather",
    name="FSDP float8 weight all-gather (global amax, e4m3 cast, 1-byte gather)",
    category="fsdp",
    source_repo="pytorch/ao",
    source_file="torchao/float8/fsdp_utils.py",
    source_function="precompute_float8_dynamic_scale_for_fsdp / WeightWithDynamicFloat8CastTensor.fsdp_pre_all_gather",
    world_sizes=(2, 4, 8),
    atol=2.0**-9,
    rtol=0.13,  # one float8 e4m3 step (3 mantissa bits) where a product lands on a rounding tie
    tags=("low_precision", "all_gather", "variable_size"),
)

H, I = 4096, 14336
E4M3_MAX = 448.0


def shapes(world_size, size):
    h = scaled(H, size**0.5, 16 * world_size)
    i = scaled(I, size**0.5, 16 * world_size)
    return [(3 * h, h), (h, h), (2 * i, h), (h, i)]


def make_inputs(rank, world_size, seed, device="cpu", size=1.0):
    g = generator(seed * 1000 + rank, device)
    shards = []
    for j, (rows, cols) in enumerate(shapes(world_size, size)):
        shards.append(randn((rows // world_size, cols), g, torch.bfloat16, device, scale=0.02 * (j + 1)))
    return (shards,)


def reference(shards):
    w = dist.get_world_size()
    amax = torch.stack([s.abs().amax().float() for s in shards])
    dist.all_reduce(amax, op=dist.ReduceOp.MAX)
    scales = E4M3_MAX / amax.clamp(min=1e-12)
    weights = []
    for s, sc in zip(shards, scales):
        w8 = (s.float() * sc).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)
        full = torch.empty((s.shape[0] * w, s.shape[1]), dtype=torch.uint8, device=s.device)
        dist.all_gather_into_tensor(full, w8.view(torch.uint8))
        weights.append(full.view(torch.float8_e4m3fn))
    return weights, scales


def roofline(world_size, size=1.0):
    # link: the (W-1)/W of every weight held elsewhere must arrive, 1 byte per element; the
    #       four fp32 amaxes are negligible but counted (all-reduce, 2 (W-1)/W 16 B).
    # HBM:  read the bf16 shards once (the amax and the cast can share one pass only if the
    #       shard stays on chip, so one read is the bound), write the full float8 weights.
    # FLOPs: abs-max, scale, clamp: about 3 per local element.
    p = sum(r * c for r, c in shapes(world_size, size))
    w = world_size
    return Roofline(
        link_bytes=(w - 1) / w * p + 2 * (w - 1) / w * 16,
        hbm_bytes=p / w * 2 + p,
        flops=3 * p / w,
    )
