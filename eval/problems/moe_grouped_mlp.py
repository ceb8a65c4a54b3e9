"""MoE dispatch fused with the grouped expert MLP (SwiGLU) on the expert-parallel ranks.

Inputs as in moe_dispatch: `tokens` (T x H bf16), `topk_idx` (T x k int64), `num_experts`
E, experts placed in contiguous blocks of E/W per rank; plus this rank's expert weights
`w1` (E/W x H x 2F bf16: gate columns first, then up) and `w2` (E/W x F x H bf16). Every rank
returns (out, tokens_per_expert):

- out (N x H bf16): for every row x routed to local expert e, in the dispatch layout (by local
  expert, then source rank, then token index at the source),
  (silu(x @ w1[e][:, :F]) * (x @ w1[e][:, F:])) @ w2[e] (intermediate in bf16);
- tokens_per_expert (E/W int64).

Megatron runs the dispatcher, then GroupedMLP over the expert-sorted rows; a fused kernel
(Comet, Flux, DeepEP + DeepGEMM) starts each expert's GEMM as soon as its rows have arrived.
"""

import torch
import torch.nn.functional as F

from eval.problem import Meta, Roofline, generator, randn, scaled
from eval.problems._moe import dispatch, routing
from eval.problems.moe_dispatch import dims

META = Meta(
    id="moe_grouped_mlp",
    name="MoE dispatch + grouped expert MLP (SwiGLU)",
    category="expert",
    source_repo="NVIDIA/Megatron-LM",
    source_file="megatron/core/transformer/moe/experts.py",
    source_function="GroupedMLP.forward (after MoEAlltoAllTokenDispatcher.token_dispatch)",
    world_sizes=(2, 4, 8),
    tags=("all_to_all", "variable_size", "grouped_gemm", "overlap"),
)

FFN = 768  # moe_intermediate_size of Qwen3-30B-A3B


def _ffn(size):
    return scaled(FFN, size**0.5, 16)


def make_inputs(rank, world_size, seed, device="cpu", size=1.0):
    t, h, e, k = dims(world_size, size)
    f = _ffn(size)
    g = generator(seed * 1000 + rank, device)
    tokens = randn((t, h), g, torch.bfloat16, device)
    idx, _ = routing(rank, world_size, seed, device, t, e, k)
    gw = generator(seed * 1000 + 300 + rank, device)
    w1 = randn((e // world_size, h, 2 * f), gw, torch.bfloat16, device, scale=h**-0.5)
    w2 = randn((e // world_size, f, h), gw, torch.bfloat16, device, scale=f**-0.5)
    return tokens, idx, e, w1, w2


def reference(tokens, topk_idx, num_experts, w1, w2):
    recv, per_expert, _ = dispatch(tokens, topk_idx, num_experts)
    outs = []
    for e, x in enumerate(torch.split(recv, per_expert.tolist())):
        gate, up = (x @ w1[e]).chunk(2, dim=-1)
        outs.append((F.silu(gate) * up) @ w2[e])
    return torch.cat(outs), per_expert


def roofline(world_size, size=1.0):
    # link: as moe_dispatch: (W-1)/W T H 2 B in expectation must cross.
    # HBM:  read the tokens and all local expert weights (every expert receives tokens at
    #       these sizes), write the T k output rows (expected per rank).
    # FLOPs: per received row 2 H 2F + 2 F H = 6 H F; T k rows per rank in expectation.
    t, h, e, k = dims(world_size, size)
    f = _ffn(size)
    w = world_size
    return Roofline(
        link_bytes=(w - 1) / w * t * h * 2,
        hbm_bytes=t * h * 2 + e // w * 3 * h * f * 2 + t * k * h * 2,
        flops=6 * t * k * h * f,
    )
