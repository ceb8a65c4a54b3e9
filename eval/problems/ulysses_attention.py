"""Ulysses sequence-parallel causal attention: all-to-all, attention on a head shard, all-to-all back.

Every rank holds its contiguous slice of the sequence: `q` (B x S/W x H x D), `k`, `v`
(B x S/W x Hkv x D), bf16, grouped-query attention with H = 4 Hkv (query head i uses kv head
i // 4). Every rank returns its slice of the causal attention output (B x S/W x H x D, bf16):
out[b, t, i] = softmax over t' <= t of (q[t, i] . k[t', i//4] / sqrt(D)) weighted sum of
v[t', i//4], over the WHOLE sequence (token positions in rank order).

DeepSpeed-Ulysses exchanges sequence shards for head shards, runs ordinary attention on
H/W heads of the full sequence, and exchanges back. A faster kernel may overlap the
exchanges with attention of heads already present, or choose another decomposition.
"""

import torch
import torch.distributed as dist
import torch.nn.functional as F

from eval.problem import Meta, Roofline, generator, randn, scaled
from eval.problems.ulysses_qkv_a2a import seq_to_heads

META = Meta(
    id="ulysses_attention",
    name="Ulysses sequence-parallel causal attention (GQA)",
    category="sequence",
    source_repo="deepspeedai/DeepSpeed",
    source_file="deepspeed/sequence/layer.py",
    source_function="DistributedAttention.forward",
    world_sizes=(2, 4, 8),
    atol=2e-2,
    rtol=2e-2,
    tags=("all_to_all", "attention", "overlap"),
)

B, S, HKV, D = 1, 16384, 8, 128


def _dims(world_size, size):
    f = size**0.25
    hkv = scaled(HKV, f, world_size)
    return B, scaled(S, size**0.5, 16 * world_size), 4 * hkv, hkv, scaled(D, f, 16)


def make_inputs(rank, world_size, seed, device="cpu", size=1.0):
    b, s, h, hkv, d = _dims(world_size, size)
    g = generator(seed * 1000 + rank, device)
    sl = s // world_size
    return (
        randn((b, sl, h, d), g, torch.bfloat16, device),
        randn((b, sl, hkv, d), g, torch.bfloat16, device),
        randn((b, sl, hkv, d), g, torch.bfloat16, device),
    )


def heads_to_seq(x):
    """(B, S, H/W, D) head shard -> (B, S/W, H, D) sequence shard."""
    w = dist.get_world_size()
    b, s, hl, d = x.shape
    send = x.reshape(b, w, s // w, hl, d).transpose(0, 1).contiguous()  # chunk j: rank j's tokens
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send)  # recv[j]: heads of rank j, my tokens
    return recv.permute(1, 2, 0, 3, 4).reshape(b, s // w, w * hl, d)


def reference(q, k, v):
    qh, kh, vh = seq_to_heads(q), seq_to_heads(k), seq_to_heads(v)
    rep = qh.shape[2] // kh.shape[2]
    qt = qh.transpose(1, 2)  # (B, H/W, S, D)
    kt = kh.transpose(1, 2).repeat_interleave(rep, dim=1)
    vt = vh.transpose(1, 2).repeat_interleave(rep, dim=1)
    o = F.scaled_dot_product_attention(qt, kt, vt, is_causal=True)
    return heads_to_seq(o.transpose(1, 2).contiguous())


def roofline(world_size, size=1.0):
    # link: a true lower bound over all decompositions (Ulysses, ring, ...): rank 0's keys
    #       and values are needed by every later query, so either they leave rank 0 (B S/W
    #       2 Hkv D bf16) or the other ranks' queries come to it ((W-1) B S/W H D bf16).
    # HBM:  read q, k, v, write out.
    # FLOPs: causal attention, 2 B H D S^2 in total (QK^T and PV over the unmasked half),
    #        shared evenly at best.
    b, s, h, hkv, d = _dims(world_size, size)
    w = world_size
    sl = s // w
    return Roofline(
        link_bytes=b * sl * d * 2 * min(2 * hkv, (w - 1) * h),
        hbm_bytes=b * sl * (2 * h + 2 * hkv) * d * 2,
        flops=2 * b * h * d * s * s / w,
    )
