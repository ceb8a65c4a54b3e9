"""Ring attention backward (causal), context parallel: dQ local, dK/dV returned to their owners.

Every rank holds its contiguous slice of the sequence: `q`, `k`, `v` and the upstream
gradient `dout` (all B x S/W x H x D, bf16). With out = causal attention of q against the
whole prefix (scale 1/sqrt(D), token positions in rank order, as in ring_attention_fwd), every
rank returns (dq, dk, dv), each B x S/W x H x D bf16: the gradients of sum(out * dout) with
respect to ITS OWN slices of q, k and v. dk and dv of a rank's keys collect contributions
from the queries of every later rank.

The ring-flash-attention backward recomputes the softmax from the log-sum-exp, passes K/V
around the ring and passes the dK/dV accumulators around behind them. This reference gathers
K/V, recomputes the statistics, computes all block gradients in float32 and reduce-scatters
dK/dV: the same numbers by another route.
"""

import torch
import torch.distributed as dist

from eval.problem import Meta, Roofline, generator, randn, scaled

META = Meta(
    id="ring_attention_bwd",
    name="Ring attention backward (causal): dQ, and dK/dV reduced to their owners",
    category="context",
    source_repo="zhuzilin/ring-flash-attention",
    source_file="ring_flash_attn/ring_flash_attn.py",
    source_function="ring_flash_attn_backward",
    world_sizes=(2, 4, 8),
    atol=2e-2,
    rtol=2e-2,
    tags=("p2p", "attention", "backward"),
)

B, SL, H, D = 1, 4096, 16, 128


def _dims(world_size, size):
    f = size**0.25
    return B, scaled(SL, size**0.5, 16), scaled(H, f, 2), scaled(D, f, 16)


def make_inputs(rank, world_size, seed, device="cpu", size=1.0):
    b, sl, h, d = _dims(world_size, size)
    g = generator(seed * 1000 + rank, device)
    return tuple(randn((b, sl, h, d), g, torch.bfloat16, device) for _ in range(4))


def reference(q, k, v, dout):
    rank, w = dist.get_rank(), dist.get_world_size()
    b, sl, h, d = q.shape
    scale = d**-0.5
    kv = torch.stack([k, v])  # (2, B, SL, H, D)
    allkv = torch.empty((w * 2, *kv.shape[1:]), dtype=kv.dtype, device=kv.device)
    dist.all_gather_into_tensor(allkv, kv)  # concatenated on dim 0
    allkv = allkv.view(w, *kv.shape)
    qf = q.float().transpose(1, 2)  # (B, H, SL, D)
    dof = dout.float().transpose(1, 2)
    diag = torch.ones(sl, sl, dtype=torch.bool, device=q.device).triu(1)

    def scores(j):
        s = torch.matmul(qf, allkv[j, 0].float().permute(0, 2, 3, 1)) * scale
        return s.masked_fill(diag, float("-inf")) if j == rank else s

    # pass 1: the log-sum-exp and the output of each query row over the visible blocks
    lse = torch.stack([torch.logsumexp(scores(j), -1) for j in range(rank + 1)]).logsumexp(0)
    out = sum(torch.matmul(torch.exp(scores(j) - lse[..., None]), allkv[j, 1].float().transpose(1, 2)) for j in range(rank + 1))
    delta = (out.to(torch.bfloat16).float() * dof).sum(-1, keepdim=True)  # rowsum(dO * O), O as stored
    # pass 2: block gradients; dK/dV of every block go back to the block's owner
    dq = torch.zeros_like(qf)
    dkv = torch.zeros((w, 2, b, sl, h, d), dtype=torch.float32, device=q.device)
    for j in range(rank + 1):
        kj, vj = allkv[j, 0].float().transpose(1, 2), allkv[j, 1].float().transpose(1, 2)
        p = torch.exp(scores(j) - lse[..., None])  # (B, H, SL, SL)
        dv = torch.matmul(p.transpose(-1, -2), dof)
        ds = p * (torch.matmul(dof, vj.transpose(-1, -2)) - delta)
        dq += torch.matmul(ds, kj) * scale
        dk = torch.matmul(ds.transpose(-1, -2), qf) * scale
        dkv[j, 0] = dk.transpose(1, 2)
        dkv[j, 1] = dv.transpose(1, 2)
    mine = torch.empty((2, b, sl, h, d), dtype=torch.float32, device=q.device)
    dist.reduce_scatter_tensor(mine, dkv.view(w * 2, *dkv.shape[2:]))  # dim 0 in rank order
    bf = torch.bfloat16
    return dq.transpose(1, 2).to(bf), mine[0].to(bf), mine[1].to(bf)


def roofline(world_size, size=1.0):
    # link: rank 0's K/V must meet every later query and its dK/dV collect from all of them:
    #       at least one of K/V leaving rank 0 (B S/W 2H D bf16) or the others' queries
    #       arriving ((W-1) B S/W H D bf16); the smaller is a lower bound.
    # HBM:  read q, k, v, dout, write dq, dk, dv.
    # FLOPs: five S x S x D matmuls over the causal half (recomputed QK^T, dV, dP, dQ, dK):
    #        5 B H D S^2 in total, balanced at best.
    b, sl, h, d = _dims(world_size, size)
    w = world_size
    s = w * sl
    return Roofline(
        link_bytes=b * sl * d * 2 * min(2 * h, (w - 1) * h),
        hbm_bytes=7 * b * sl * h * d * 2,
        flops=5 * b * h * d * s * s / w,
    )
