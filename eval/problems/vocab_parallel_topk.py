"""Top-k over a vocabulary-parallel logit matrix (sampling at decode time).

Every rank holds its vocabulary shard of the float32 logits `logits` (B x V/W, columns
[r*V/W, (r+1)*V/W)) for a decode batch of B sequences. Every rank returns (values, indices):
the k = 50 largest logits of each row over the FULL vocabulary, in descending order (float32,
B x k), and their global vocabulary ids (int64, B x k). Random float32 logits have no ties.

vLLM and SGLang gather the full logits to one rank before top-k sampling; it suffices to take
a local top-k per shard and merge W * k candidates per row.
"""

import torch
import torch.distributed as dist

from eval.problem import Meta, Roofline, generator, randn, scaled

META = Meta(
    id="vocab_parallel_topk",
    name="Vocab-parallel top-k of logits (decode sampling)",
    category="vocab",
    source_repo="vllm-project/vllm",
    source_file="vllm/model_executor/layers/logits_processor.py",
    source_function="LogitsProcessor._gather_logits (then top-k in the sampler)",
    world_sizes=(2, 4, 8),
    dtype="float32",
    tags=("selection", "latency"),
)

B, V, K = 1024, 152064, 50


def _dims(world_size, size):
    return scaled(B, size**0.5, 8), scaled(V, size**0.5, 64 * world_size)


def make_inputs(rank, world_size, seed, device="cpu", size=1.0):
    b, v = _dims(world_size, size)
    g = generator(seed * 1000 + rank, device)
    return (randn((b, v // world_size), g, torch.float32, device, scale=3.0),)


def reference(logits):
    rank, w = dist.get_rank(), dist.get_world_size()
    vl = logits.shape[1]
    vals, idx = logits.topk(K, dim=-1)
    cand = torch.stack([vals, (idx + rank * vl).to(torch.float32)])  # ids < 2^24: exact in fp32
    allc = torch.empty((w * 2, *vals.shape), dtype=torch.float32, device=logits.device)
    dist.all_gather_into_tensor(allc, cand)
    allc = allc.view(w, 2, *vals.shape)
    all_vals = allc[:, 0].permute(1, 0, 2).reshape(vals.shape[0], -1)
    all_ids = allc[:, 1].permute(1, 0, 2).reshape(vals.shape[0], -1)
    top, pos = all_vals.topk(K, dim=-1)
    return top, all_ids.gather(1, pos).to(torch.int64)


def roofline(world_size, size=1.0):
    # link: in expectation (W-1)/W of each row's k winners lie on other ranks; each needs at
    #       least a value and an id (4 + 4 B) to arrive: (W-1)/W B k 8 B.
    # HBM:  read the B x V/W float32 shard once, write the B x k values and ids.
    # FLOPs: one comparison per logit (counted as 1 operation).
    b, v = _dims(world_size, size)
    w = world_size
    return Roofline(
        link_bytes=(w - 1) / w * b * K * 8,
        hbm_bytes=b * v // w * 4 + b * K * 12,
        flops=b * v / w,
    )
