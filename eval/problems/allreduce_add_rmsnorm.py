"""Fused all-reduce + residual add + RMSNorm (the tail of every tensor-parallel block in inference).

Every rank holds `partial` (T x H bf16, its row-parallel GEMM output before the reduction),
and the same `residual` (T x H bf16) and norm `weight` (H bf16). Every rank returns
(normed, new_residual), both T x H bf16:

    new_residual = bf16(sum over ranks of partial + residual)        (sum in float32)
    normed       = bf16(new_residual * rsqrt(mean(new_residual^2) + 1e-6) * weight)   (float32 math)

vLLM's AllReduceFusionPass (FlashInfer / TensorRT-LLM all-reduce fusion) and SGLang replace
the all-reduce, the add and the norm with one kernel; this reference is the unfused sequence.
"""

import torch
import torch.distributed as dist

from eval.problem import Meta, Roofline, generator, randn, scaled

META = Meta(
    id="allreduce_add_rmsnorm",
    name="All-reduce + residual add + RMSNorm (inference block tail)",
    category="inference",
    source_repo="vllm-project/vllm",
    source_file="vllm/compilation/collective_fusion.py",
    source_function="AllReduceFusionPass (AllReduceFusedAddRMSNormPattern)",
    world_sizes=(2, 4, 8),
    tags=("all_reduce", "norm", "fusion"),
)

T, H = 4096, 8192
EPS = 1e-6


def _dims(size):
    return scaled(T, size**0.5, 8), scaled(H, size**0.5, 64)


def make_inputs(rank, world_size, seed, device="cpu", size=1.0):
    t, h = _dims(size)
    g = generator(seed * 1000 + rank, device)
    partial = randn((t, h), g, torch.bfloat16, device)
    gs = generator(seed * 1000 + 999, device)
    residual = randn((t, h), gs, torch.bfloat16, device)
    weight = (1.0 + randn((h,), gs, torch.float32, device, scale=0.1)).to(torch.bfloat16)
    return partial, residual, weight


def reference(partial, residual, weight):
    total = partial.float()
    dist.all_reduce(total)
    new_residual = (total + residual.float()).to(torch.bfloat16)
    r = new_residual.float()
    normed = r * torch.rsqrt(r.pow(2).mean(dim=-1, keepdim=True) + EPS) * weight.float()
    return normed.to(torch.bfloat16), new_residual


def roofline(world_size, size=1.0):
    # link: all-reduce of T x H: 2 (W-1)/W of it, at 2 B per element (bf16 partials; a
    #       solution may reduce in higher precision but need not send more).
    # HBM:  read partial and residual, write normed and new_residual (weight negligible).
    # FLOPs: about 6 per element (adds, square, scale).
    t, h = _dims(size)
    w = world_size
    return Roofline(
        link_bytes=2 * (w - 1) / w * t * h * 2,
        hbm_bytes=4 * t * h * 2 + h * 2,
        flops=6 * t * h,
    )
