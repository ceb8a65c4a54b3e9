"""Tensor-parallel decode step of a Llama-70B MLP: GEMV-shaped GEMMs and a small all-reduce.

A decode batch of B = 32 tokens; every rank holds the same activations `x` (B x H bf16), its
shard of the merged gate/up projection `w_gate_up` (2I/W x H, first I/W rows gate, then up,
nn.Linear layout) and of the down projection `w_down` (H x I/W). Every rank returns the same
(B x H) bf16 tensor: the sum over ranks of (silu(x @ w_gate.T) * (x @ w_up.T)) @ w_down.T.

vLLM's LlamaMLP under tensor parallelism (MergedColumnParallelLinear, RowParallelLinear and
its custom all-reduce). The step reads every weight byte once and moves a few hundred KB:
HBM-bound GEMMs followed by a latency-bound all-reduce, which a fused kernel can start as
soon as the first output tiles are done.
"""

import torch
import torch.distributed as dist
import torch.nn.functional as F

from eval.problem import Meta, Roofline, generator, randn, scaled

META = Meta(
    id="tp_decode_mlp",
    name="TP decode MLP: weight-bound GEMVs + small all-reduce (vLLM)",
    category="inference",
    source_repo="vllm-project/vllm",
    source_file="vllm/model_executor/models/llama.py",
    source_function="LlamaMLP.forward (RowParallelLinear with tensor_model_parallel_all_reduce)",
    world_sizes=(2, 4, 8),
    tags=("gemv", "latency", "all_reduce"),
)

B, H, I = 32, 8192, 28672  # Llama-3-70B


def _dims(world_size, size):
    return max(1, int(B * size**0.2)), scaled(H, size**0.4, 64), scaled(I, size**0.4, 64 * world_size)


def make_inputs(rank, world_size, seed, device="cpu", size=1.0):
    b, h, i = _dims(world_size, size)
    g = generator(seed * 1000 + rank, device)
    w_gate_up = randn((2 * i // world_size, h), g, torch.bfloat16, device, scale=h**-0.5)
    w_down = randn((h, i // world_size), g, torch.bfloat16, device, scale=i**-0.5)
    gx = generator(seed * 1000 + 999, device)
    return randn((b, h), gx, torch.bfloat16, device), w_gate_up, w_down


def reference(x, w_gate_up, w_down):
    gate, up = (x @ w_gate_up.t()).chunk(2, dim=-1)
    out = (F.silu(gate) * up) @ w_down.t()
    dist.all_reduce(out)
    return out


def roofline(world_size, size=1.0):
    # link: all-reduce of the B x H bf16 output, 2 (W-1)/W of it.
    # HBM:  read both weight shards (3 H I/W bf16) and x, write the output.
    # FLOPs: 6 B H I / W.
    b, h, i = _dims(world_size, size)
    w = world_size
    return Roofline(
        link_bytes=2 * (w - 1) / w * b * h * 2,
        hbm_bytes=(3 * h * i // w + 2 * b * h) * 2,
        flops=6 * b * h * i / w,
    )
