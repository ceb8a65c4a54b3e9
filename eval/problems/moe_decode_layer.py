"""Expert-parallel MoE layer at decode time: dispatch, expert MLPs, combine, for a small batch.

Every rank holds its decode tokens `tokens` (T = 128 x H bf16), their routing `topk_idx`
(T x k int64) and `topk_weights` (T x k float32), `num_experts` E (contiguous blocks of E/W
experts per rank), and its experts' weights `w1` (E/W x H x 2F) and `w2` (E/W x F x H), bf16.
Every rank returns out (T x H bf16):

    out[t] = sum_j topk_weights[t, j] * MLP_{topk_idx[t, j]}(tokens[t]),
    MLP_e(x) = (silu(x @ w1[e][:, :F]) * (x @ w1[e][:, F:])) @ w2[e]     (bf16, sum in float32)

with each MLP_e evaluated on the rank that owns expert e. At decode the layer is bound by
reading the expert weights and by the latency of two all-to-alls (DeepEP's low-latency
dispatch/combine kernels, used by SGLang and vLLM for wide expert parallelism).
"""

import torch

from eval.problem import Meta, Roofline, generator, randn, scaled
from eval.problems._moe import routing
from eval.problems.moe_combine import reference as combine
from eval.problems.moe_grouped_mlp import reference as dispatch_mlp

META = Meta(
    id="moe_decode_layer",
    name="Expert-parallel MoE layer at decode (dispatch, experts, combine)",
    category="inference",
    source_repo="deepseek-ai/DeepEP",
    source_file="deep_ep/buffer.py",
    source_function="Buffer.low_latency_dispatch / Buffer.low_latency_combine",
    world_sizes=(2, 4, 8),
    tags=("all_to_all", "variable_size", "latency", "grouped_gemm"),
)

T, H, E, K, FFN = 128, 2048, 128, 8, 768


def _dims(world_size, size):
    e = scaled(E, size**0.25, 2 * world_size)
    return scaled(T, size**0.25, 4), scaled(H, size**0.4, 16), e, min(K, e // 2), scaled(FFN, size**0.4, 16)


def make_inputs(rank, world_size, seed, device="cpu", size=1.0):
    t, h, e, k, f = _dims(world_size, size)
    g = generator(seed * 1000 + rank, device)
    tokens = randn((t, h), g, torch.bfloat16, device)
    idx, weights = routing(rank, world_size, seed, device, t, e, k)
    gw = generator(seed * 1000 + 300 + rank, device)
    w1 = randn((e // world_size, h, 2 * f), gw, torch.bfloat16, device, scale=h**-0.5)
    w2 = randn((e // world_size, f, h), gw, torch.bfloat16, device, scale=f**-0.5)
    return tokens, idx, weights, e, w1, w2


def reference(tokens, topk_idx, topk_weights, num_experts, w1, w2):
    import torch.distributed as dist

    rows, _ = dispatch_mlp(tokens, topk_idx, num_experts, w1, w2)
    w = dist.get_world_size()
    el = num_experts // w
    per_expert = torch.bincount(topk_idx.reshape(-1), minlength=num_experts)
    counts = torch.empty_like(per_expert)
    dist.all_to_all_single(counts, per_expert)
    return combine(rows, counts.view(w, el), topk_idx, topk_weights)


def roofline(world_size, size=1.0):
    # link: as moe_dispatch plus moe_combine: at least (W-1)/W T H 2 B each way in
    #       expectation (a token out to a remote expert, one reduced row back).
    # HBM:  read the weights of every local expert that receives a token: T W k / E = 8 W rows
    #       per expert on average, but the least popular experts may get none, so only 90% of
    #       the expert weights are counted; read the tokens, write out.
    # FLOPs: 6 H F per (token, expert) pair, T k pairs per rank in expectation.
    t, h, e, k, f = _dims(world_size, size)
    w = world_size
    return Roofline(
        link_bytes=(w - 1) / w * t * h * 2,
        hbm_bytes=0.9 * e // w * 3 * h * f * 2 + 2 * t * h * 2,
        flops=6 * t * k * h * f,
    )
