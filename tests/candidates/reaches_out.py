# Tries to reach beyond its sandbox: the network (a server on the host's loopback, whose port
# the test writes into PORT below) and the judges' memory through /proc. It fails loudly if
# either works, and otherwise does the work honestly.
import os
import socket

import torch.distributed as dist

PORT = 0  # replaced by the test
_reached = []
if PORT:
    try:
        socket.create_connection(("127.0.0.1", PORT), timeout=2).close()
        _reached.append(f"loopback port {PORT}")
    except OSError:
        pass
for pid in os.listdir("/proc"):
    if pid.isdigit():
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read()
            if b"eval.judge" in cmd:
                start = int(open(f"/proc/{pid}/maps").readline().split("-")[0], 16)
                with open(f"/proc/{pid}/mem", "rb") as f:
                    f.seek(start)
                    f.read(1)
                _reached.append(f"the memory of judge process {pid}")
        except OSError:
            pass


def solution(x):
    if _reached:
        raise RuntimeError("reached " + ", ".join(_reached))
    out = x.clone()
    dist.all_reduce(out)
    return out
