"""GEMM + all-reduce: the row-parallel linear layer of tensor parallelism (no sequence parallel).

Every rank holds `x` (M x K/W bf16, its shard of the activations' K dimension, the output of a
column-parallel layer), `weight` (N x K/W bf16, its shard of the weight's input dimension, in
the nn.Linear layout) and `bias` (N, replicated). Every rank returns the same (M, N) bf16
tensor: the sum over ranks of x @ weight.T, plus bias (added once, after the reduction).
The second GEMM of every Megatron attention and MLP block; a fused kernel streams finished
output tiles into the all-reduce while the GEMM goes on.
"""

import torch
import torch.distributed as dist

from eval.problem import Meta, Roofline, generator, randn, scaled

META = Meta(
    id="row_parallel_linear",
    name="GEMM + all-reduce (row-parallel linear)",
    category="tensor",
    source_repo="NVIDIA/Megatron-LM",
    source_file="megatron/core/tensor_parallel/layers.py",
    source_function="RowParallelLinear.forward (reduce_from_tensor_model_parallel_region)",
    world_sizes=(2, 4, 8),
    tags=("overlap", "gemm"),
)

M, K, N = 8192, 16384, 8192  # tokens, input features (sharded), output features


def _dims(world_size, size):
    f = size ** (1 / 3)
    return scaled(M, f, 128), scaled(K, f, 128 * world_size), scaled(N, f, 128)


def make_inputs(rank, world_size, seed, device="cpu", size=1.0):
    m, k, n = _dims(world_size, size)
    g = generator(seed * 1000 + rank, device)
    x = randn((m, k // world_size), g, torch.bfloat16, device)
    weight = randn((n, k // world_size), g, torch.bfloat16, device, scale=k**-0.5)
    gb = generator(seed * 1000 + 999, device)  # the bias is replicated: same on every rank
    bias = randn((n,), gb, torch.bfloat16, device, scale=0.1)
    return x, weight, bias


def reference(x, weight, bias):
    out = x @ weight.t()
    dist.all_reduce(out)
    return out + bias


def roofline(world_size, size=1.0):
    # link: the M x N output is a sum over ranks that every rank needs: an all-reduce, at
    #       least 2 (W-1)/W of the output's bytes per rank without in-network reduction.
    # HBM:  read the x and weight shards and the bias, write the output.
    # FLOPs: the local GEMM, 2 M N K/W.
    m, k, n = _dims(world_size, size)
    w = world_size
    return Roofline(
        link_bytes=2 * (w - 1) / w * m * n * 2,
        hbm_bytes=(m * k // w + n * k // w + n + m * n) * 2,
        flops=2 * m * n * k / w,
    )
