# kernel: fast_once
"""all_reduce: the reference, fast only in its first {FAST_CHECKS} checks (per rank), 200 ms slower
per call in every check after them: a kernel that looks fast once. The checks that saw it are
counted in a file of the folder the checker keeps for this source's builds ($PKAGENT_CACHE, one
per content hash, the one place a candidate may keep something between checks), or in
{COUNTER} where it runs outside the checker."""
import os
import time
from pathlib import Path

import torch.distributed as dist

_counter = Path(os.environ["PKAGENT_CACHE"]) / "fast_once.count" if "PKAGENT_CACHE" in os.environ else Path("{COUNTER}")
_rank = os.environ.get("RANK", "0")
_seen = _counter.read_text().split().count(_rank) if _counter.exists() else 0
with open(_counter, "a") as f:
    f.write(_rank + "\n")
DELAY_S = 0.0 if _seen < {FAST_CHECKS} else 0.2


def solution(x):
    time.sleep(DELAY_S)
    out = x.clone()
    dist.all_reduce(out)
    return out
