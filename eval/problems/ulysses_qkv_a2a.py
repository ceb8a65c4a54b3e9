"""Ulysses sequence parallelism: the all-to-all that turns sequence shards into head shards.

Every rank holds its contiguous slice of the sequence for all heads: `q` (B x S/W x H x D),
`k` and `v` (B x S/W x Hkv x D), bf16, grouped-query attention (H = 4 Hkv). Every rank
returns (q, k, v) re-sharded by heads: (B x S x H/W x D) and (B x S x Hkv/W x D), where rank
r holds heads [r*H/W, (r+1)*H/W) (and kv heads [r*Hkv/W, (r+1)*Hkv/W)) for the whole sequence,
the sequence in rank order. One all-to-all per tensor in DeepSpeed-Ulysses; a kernel can do
the three in one exchange and write the permuted layout directly.
"""

import torch
import torch.distributed as dist

from eval.problem import Meta, Roofline, generator, randn, scaled

META = Meta(
    id="ulysses_qkv_a2a",
    name="Ulysses all-to-all: QKV from sequence shards to head shards",
    category="sequence",
    source_repo="deepspeedai/DeepSpeed",
    source_file="deepspeed/sequence/layer.py",
    source_function="single_all_to_all (DistributedAttention.forward, scatter heads / gather sequence)",
    world_sizes=(2, 4, 8),
    tags=("all_to_all", "layout"),
)

B, S, HKV, D = 1, 32768, 8, 128  # H = 4 * HKV = 32


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


def seq_to_heads(x):
    """(B, S/W, H, D) sequence shard -> (B, S, H/W, D) head shard."""
    w = dist.get_world_size()
    b, sl, h, d = x.shape
    send = x.reshape(b, sl, w, h // w, d).permute(2, 0, 1, 3, 4).contiguous()  # chunk j -> rank j
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send)  # recv[j]: rank j's tokens, my heads
    return recv.permute(1, 0, 2, 3, 4).reshape(b, w * sl, h // w, d)


def reference(q, k, v):
    return seq_to_heads(q), seq_to_heads(k), seq_to_heads(v)


def roofline(world_size, size=1.0):
    # link: of its q, k, v shards a rank keeps only its own heads, 1/W; the rest must leave:
    #       (W-1)/W of B S/W (H + 2 Hkv) D bf16 (and as much arrives).
    # HBM:  read the three inputs, write the three outputs.
    b, s, h, hkv, d = _dims(world_size, size)
    w = world_size
    per_rank = b * s // w * (h + 2 * hkv) * d * 2
    return Roofline(link_bytes=(w - 1) / w * per_rank, hbm_bytes=2 * per_rank, flops=0)
