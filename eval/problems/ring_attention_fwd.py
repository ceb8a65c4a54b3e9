"""Ring attention forward (causal), context parallel.

Every rank holds its contiguous slice of the sequence: `q`, `k`, `v` (B x S/W x H x D, bf16).
Every rank returns (out, lse) for its queries against the whole causal prefix:

- out (B x S/W x H x D, bf16): causal softmax attention, scale 1/sqrt(D), over all keys at
  positions <= the query's (token positions in rank order);
- lse (B x H x S/W, float32): the log-sum-exp of the scaled scores of each query row (the
  statistic the backward pass and further merges need).

The ring-flash-attention algorithm passes K/V blocks around the ring (send to rank+1, receive
from rank-1), computes each visible block while the next one travels, and merges partial
results with their log-sum-exps in float32. With contiguous sharding the last rank does the
most work; a faster solution may rebalance.
"""

import torch
import torch.distributed as dist

from eval.problem import Meta, Roofline, generator, randn, scaled

META = Meta(
    id="ring_attention_fwd",
    name="Ring attention forward (causal, K/V passed around the ring)",
    category="context",
    source_repo="zhuzilin/ring-flash-attention",
    source_file="ring_flash_attn/ring_flash_attn.py",
    source_function="ring_flash_attn_forward",
    world_sizes=(2, 4, 8),
    atol=2e-2,
    rtol=2e-2,
    tags=("p2p", "attention", "overlap"),
)

B, SL, H, D = 1, 4096, 32, 128  # S/W tokens per rank (weak scaling: S = W * SL)


def _dims(world_size, size):
    f = size**0.25
    return B, scaled(SL, size**0.5, 16), scaled(H, f, 2), scaled(D, f, 16)


def make_inputs(rank, world_size, seed, device="cpu", size=1.0):
    b, sl, h, d = _dims(world_size, size)
    g = generator(seed * 1000 + rank, device)
    return tuple(randn((b, sl, h, d), g, torch.bfloat16, device) for _ in range(3))


def block_attention(qf, k, v, causal, scale):
    """Scores of float32 queries (B, H, Sq, D) against one K/V block (B, Sk, H, D): the block's
    output (B, H, Sq, D) and log-sum-exp (B, H, Sq), both float32."""
    s = torch.matmul(qf, k.float().permute(0, 2, 3, 1)) * scale
    if causal:
        n = s.shape[-1]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=s.device).triu(1), float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    p = torch.exp(s - lse[..., None])
    return torch.matmul(p, v.float().transpose(1, 2)), lse


def ring_pass(tensors, rank, w):
    """Start sending `tensors` to rank+1 and receiving the same shapes from rank-1."""
    recv = [torch.empty_like(t) for t in tensors]
    ops = [dist.P2POp(dist.isend, t, (rank + 1) % w) for t in tensors]
    ops += [dist.P2POp(dist.irecv, r, (rank - 1) % w) for r in recv]
    return recv, dist.batch_isend_irecv(ops)


def reference(q, k, v):
    rank, w = dist.get_rank(), dist.get_world_size()
    scale = q.shape[-1] ** -0.5
    qf = q.float().transpose(1, 2)
    out = lse = None
    kv = (k, v)
    for step in range(w):
        if step + 1 < w:
            nxt, reqs = ring_pass(kv, rank, w)
        src = (rank - step) % w
        if src <= rank:  # blocks from later ranks are entirely masked
            o, l = block_attention(qf, kv[0], kv[1], causal=(src == rank), scale=scale)
            if out is None:
                out, lse = o, l
            else:
                new = torch.logaddexp(lse, l)
                out = out * torch.exp(lse - new)[..., None] + o * torch.exp(l - new)[..., None]
                lse = new
        if step + 1 < w:
            for r in reqs:
                r.wait()
            kv = nxt
    return out.transpose(1, 2).to(torch.bfloat16), lse.contiguous()


def roofline(world_size, size=1.0):
    # link: rank 0's K/V are needed by every later query: either they leave rank 0
    #       (B S/W 2H D bf16) or the other ranks' queries reach it ((W-1) B S/W H D bf16);
    #       the smaller is a lower bound for any decomposition.
    # HBM:  read q, k, v, write out (bf16) and lse (fp32).
    # FLOPs: causal attention over S = W S/W tokens, 2 B H D S^2 in total, balanced at best.
    b, sl, h, d = _dims(world_size, size)
    w = world_size
    s = w * sl
    return Roofline(
        link_bytes=b * sl * d * 2 * min(2 * h, (w - 1) * h),
        hbm_bytes=4 * b * sl * h * d * 2 + b * h * sl * 4,
        flops=2 * b * h * d * s * s / w,
    )
