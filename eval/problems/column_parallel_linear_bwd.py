"""Backward of the column-parallel linear layer: input-gradient all-reduce + weight gradient.

Forward (not part of this problem): x (M x K, replicated on the tensor-parallel ranks) times
this rank's weight shard (N/W x K, nn.Linear layout) gives y_r = x @ weight_r.T, M x N/W.
Backward, given `grad_output` (M x N/W, bf16, this rank's columns of dL/dy), `x` and `weight`:

- grad_input = sum over ranks of grad_output @ weight (M x K), all-reduced so every rank
  holds the full input gradient;
- grad_weight = grad_output.T @ x (N/W x K), local.

Returns (grad_input, grad_weight), both bf16. Megatron overlaps the all-reduce of grad_input
with the weight-gradient GEMM; a fused kernel can do better still.
"""

import torch
import torch.distributed as dist

from eval.problem import Meta, Roofline, generator, randn, scaled

META = Meta(
    id="column_parallel_linear_bwd",
    name="Column-parallel linear backward (grad-input all-reduce + weight grad)",
    category="tensor",
    source_repo="NVIDIA/Megatron-LM",
    source_file="megatron/core/tensor_parallel/layers.py",
    source_function="LinearWithGradAccumulationAndAsyncCommunication.backward",
    world_sizes=(2, 4, 8),
    tags=("backward", "overlap", "gemm"),
)

M, K, N = 8192, 8192, 16384  # tokens, input features, output features (sharded)


def _dims(world_size, size):
    f = size ** (1 / 3)
    return scaled(M, f, 128), scaled(K, f, 128), scaled(N, f, 128 * world_size)


def make_inputs(rank, world_size, seed, device="cpu", size=1.0):
    m, k, n = _dims(world_size, size)
    g = generator(seed * 1000 + rank, device)
    grad_output = randn((m, n // world_size), g, torch.bfloat16, device)
    weight = randn((n // world_size, k), g, torch.bfloat16, device, scale=k**-0.5)
    gx = generator(seed * 1000 + 999, device)  # x is replicated across the TP ranks
    x = randn((m, k), gx, torch.bfloat16, device)
    return grad_output, x, weight


def reference(grad_output, x, weight):
    grad_input = grad_output @ weight
    handle = dist.all_reduce(grad_input, async_op=True)  # overlapped with the wgrad GEMM
    grad_weight = grad_output.t() @ x
    handle.wait()
    return grad_input, grad_weight


def roofline(world_size, size=1.0):
    # link: grad_input (M x K bf16) is a sum over ranks needed everywhere: all-reduce,
    #       2 (W-1)/W of its bytes.
    # HBM:  read grad_output, x, weight; write grad_input and grad_weight.
    # FLOPs: two GEMMs of 2 M K N/W each.
    m, k, n = _dims(world_size, size)
    w = world_size
    return Roofline(
        link_bytes=2 * (w - 1) / w * m * k * 2,
        hbm_bytes=(m * n // w + m * k + n // w * k + m * k + n // w * k) * 2,
        flops=4 * m * k * n / w,
    )
