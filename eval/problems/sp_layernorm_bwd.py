"""Backward of a sequence-parallel LayerNorm, with the weight gradients all-reduced.

Under Megatron's sequence parallelism each tensor-parallel rank holds a slice of the tokens:
`x` (T/W x H bf16) and the upstream gradient `grad_out` (T/W x H bf16); the LayerNorm's
`gamma` and `beta` (H, bf16) are replicated. Every rank returns

- grad_x (T/W x H, bf16): dL/dx of y = LayerNorm(x) * gamma + beta (eps = 1e-5, statistics
  over H in float32), for its own tokens;
- grad_gamma, grad_beta (H, float32): the sums over ALL ranks' tokens of the per-token weight
  gradients (each rank sums its tokens, then an all-reduce over the group).

This is the sequence-parallel LayerNorm of Megatron: the per-rank weight gradients only
become correct after `_allreduce_layernorm_grads` sums them across the tensor-parallel group.
A fused kernel computes grad_x and the partial weight gradients in one pass over x and folds
the small all-reduce into its tail.
"""

import torch
import torch.distributed as dist
import torch.nn.functional as F

from eval.problem import Meta, Roofline, generator, randn, scaled

META = Meta(
    id="sp_layernorm_bwd",
    name="Sequence-parallel LayerNorm backward + weight-gradient all-reduce",
    category="tensor",
    source_repo="NVIDIA/Megatron-LM",
    source_file="megatron/core/distributed/finalize_model_grads.py",
    source_function="_allreduce_layernorm_grads",
    world_sizes=(2, 4, 8),
    atol=1e-2,
    rtol=1e-2,  # grad_gamma sums T products: fp32 summation order differs between methods
    tags=("backward", "norm"),
)

T, H = 32768, 8192
EPS = 1e-5


def _dims(world_size, size):
    f = size**0.5
    return scaled(T, f, 16 * world_size), scaled(H, f, 64)


def make_inputs(rank, world_size, seed, device="cpu", size=1.0):
    t, h = _dims(world_size, size)
    g = generator(seed * 1000 + rank, device)
    x = randn((t // world_size, h), g, torch.bfloat16, device)
    grad_out = randn((t // world_size, h), g, torch.bfloat16, device)
    gw = generator(seed * 1000 + 999, device)  # the norm's parameters are replicated
    gamma = (1.0 + randn((h,), gw, torch.float32, device, scale=0.1)).to(torch.bfloat16)
    beta = randn((h,), gw, torch.bfloat16, device, scale=0.1)
    return x, grad_out, gamma, beta


def reference(x, grad_out, gamma, beta):
    with torch.enable_grad():
        xf = x.float().requires_grad_(True)
        gf = gamma.float().requires_grad_(True)
        bf = beta.float().requires_grad_(True)
        y = F.layer_norm(xf, (x.shape[-1],), gf, bf, EPS)
        grad_x, grad_gamma, grad_beta = torch.autograd.grad(y, (xf, gf, bf), grad_out.float())
    flat = torch.cat([grad_gamma, grad_beta])  # one coalesced all-reduce, as Megatron does
    dist.all_reduce(flat)
    h = x.shape[-1]
    return grad_x.to(torch.bfloat16), flat[:h].clone(), flat[h:].clone()


def roofline(world_size, size=1.0):
    # link: the 2 H fp32 weight gradients are sums over ranks needed everywhere: an
    #       all-reduce of 8 H bytes, 2 (W-1)/W of it.
    # HBM:  read x and grad_out (T/W x H bf16 each) and gamma, write grad_x; the weight
    #       gradients are negligible but counted.
    # FLOPs: about 10 per element (statistics, normalise, two reductions, the dx formula).
    t, h = _dims(world_size, size)
    w = world_size
    return Roofline(
        link_bytes=2 * (w - 1) / w * 2 * h * 4,
        hbm_bytes=3 * t // w * h * 2 + 2 * h * 2 + 2 * h * 4,
        flops=10 * t / w * h,
    )
