"""All-reduce (sum) in two shots on gloo: a reduce-scatter by point-to-point exchange, each
rank summing its shard in fp32, then an all-gather of the reduced shards."""

import torch
import torch.distributed as dist


def solution(x):
    world, rank = dist.get_world_size(), dist.get_rank()
    flat = x.reshape(-1)
    n = flat.numel()
    shard = -(-n // world)
    parts = torch.zeros(world, shard, dtype=torch.float32)
    parts.view(-1)[:n] = flat.float()
    received = torch.empty(world, shard, dtype=torch.float32)
    requests = []
    for peer in range(world):  # every rank posts its sends and receives in the same order
        if peer != rank:
            requests.append(dist.isend(parts[peer], peer))
            requests.append(dist.irecv(received[peer], peer))
    for req in requests:
        req.wait()
    received[rank] = parts[rank]
    mine = received.sum(0)
    gathered = [torch.empty(shard, dtype=torch.float32) for _ in range(world)]
    dist.all_gather(gathered, mine)
    return torch.cat(gathered)[:n].to(x.dtype).view_as(x)
