"""Scripted model turns for the agent tests: a run that writes a gloo all-reduce, checks it
with `pkagent check` inside the sandbox, reads the result and submits."""

from __future__ import annotations

from fakes.model_server import Say

GLOO_ALL_REDUCE = '''\
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
'''

CHECK = "pkagent check solution.py --problem all_reduce --device cpu --world-size 2 --size 0.001"


def write_command(code: str = GLOO_ALL_REDUCE) -> str:
    return f"cat > solution.py <<'EOF'\n{code}EOF\necho written; wc -l solution.py"


def solving_turns() -> list[Say]:
    """Three turns: write the candidate, check it, submit."""
    return [
        Say(
            "I will write a two-shot all-reduce with gloo point-to-point.",
            [("bash", {"command": write_command()})],
            input=3000,
            cached=0,
            cache_write=0,
            output=400,
        ),
        Say("Now run the checker on it.", [("bash", {"command": CHECK})], input=300, cached=3000, output=60),
        Say("The checker says correct on every trial. Submitting.", [("submit", {})], input=900, cached=3300, output=30),
    ]
