"""A tensor-parallel SwiGLU MLP block: column-parallel GEMM, SwiGLU, row-parallel GEMM, all-reduce.

Every rank holds the same activations `x` (T x H bf16), its shard of the fused gate/up
projection `w_gate_up` (2*I/W x H: first I/W rows gate, next I/W rows up, nn.Linear layout)
and its shard of the down projection `w_down` (H x I/W). Every rank returns the same (T, H)
bf16 tensor

    sum over ranks of  (silu(x @ w_gate.T) * (x @ w_up.T)) @ w_down.T

(the intermediate in bf16, as a bf16 training step computes it). One all-reduce per block
at the end; the fused version overlaps it with the down-projection GEMM.
"""

import torch
import torch.distributed as dist
import torch.nn.functional as F

from eval.problem import Meta, Roofline, generator, randn, scaled

META = Meta(
    id="tp_mlp",
    name="Tensor-parallel SwiGLU MLP (column GEMM, SwiGLU, row GEMM + all-reduce)",
    category="tensor",
    source_repo="NVIDIA/Megatron-LM",
    source_file="megatron/core/transformer/mlp.py",
    source_function="MLP.forward",
    world_sizes=(2, 4, 8),
    tags=("overlap", "gemm"),
)

T, H, I = 8192, 4096, 14336  # tokens, hidden, intermediate (Llama-3-8B)


def _dims(world_size, size):
    f = size ** (1 / 3)
    return scaled(T, f, 64), scaled(H, f, 64), scaled(I, f, 64 * world_size)


def make_inputs(rank, world_size, seed, device="cpu", size=1.0):
    t, h, i = _dims(world_size, size)
    g = generator(seed * 1000 + rank, device)
    w_gate_up = randn((2 * i // world_size, h), g, torch.bfloat16, device, scale=h**-0.5)
    w_down = randn((h, i // world_size), g, torch.bfloat16, device, scale=i**-0.5)
    gx = generator(seed * 1000 + 999, device)
    x = randn((t, h), gx, torch.bfloat16, device)
    return x, w_gate_up, w_down


def reference(x, w_gate_up, w_down):
    gate, up = (x @ w_gate_up.t()).chunk(2, dim=-1)
    out = (F.silu(gate) * up) @ w_down.t()
    dist.all_reduce(out)
    return out


def roofline(world_size, size=1.0):
    # link: the T x H output is a sum over ranks: all-reduce, 2 (W-1)/W of its bytes.
    # HBM:  read x and both weight shards, write the output (the T x 2I/W intermediate can
    #       stay on chip in a fused kernel, so it is not counted).
    # FLOPs: 2 T H (2I/W) + 2 T (I/W) H = 6 T H I / W.
    t, h, i = _dims(world_size, size)
    w = world_size
    return Roofline(
        link_bytes=2 * (w - 1) / w * t * h * 2,
        hbm_bytes=(t * h + 2 * i // w * h + h * i // w + t * h) * 2,
        flops=6 * t * h * i / w,
    )
