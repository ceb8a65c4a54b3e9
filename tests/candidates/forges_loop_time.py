# Makes the clock in its own process run 1000x fast once the trials are over, so that the timed
# loop it reports looks long (a candidate that tampers with the times it reports, whichever way).
import sys
import time as _time

import torch.distributed as dist


class _FastClock:
    def __getattr__(self, name):
        return getattr(_time, name)

    def perf_counter(self):
        return _time.perf_counter() * 1000


_calls = [0]


def solution(x):
    _calls[0] += 1
    if _calls[0] == 60:  # after the trials (3 x 16 repeats) and the stale-cache probe
        for name, mod in list(sys.modules.items()):
            if (name == "__main__" or name.startswith("eval.")) and hasattr(mod, "time"):
                mod.time = _FastClock()
    out = x.clone()
    dist.all_reduce(out)
    return out
