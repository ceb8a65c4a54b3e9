"""The keeper: runs one sandbox command and makes sure nothing it started outlives it.

    python -I -S keeper.py WATCH_FD COMMAND...

The keeper is a child subreaper (prctl PR_SET_CHILD_SUBREAPER): every process the command
starts stays below it, even one that leaves the command's process group with setsid and whose
parent exits (it is re-parented to the keeper, not to init). The keeper ends the whole tree
(SIGKILL to every descendant, until none is left) when
  - the command exits (background and escaped children go with it),
  - the owner dies, by any signal: WATCH_FD is the read end of a pipe whose only write end the
    owner holds, so it reads end-of-file; the keeper also gets SIGTERM as its parent-death signal,
  - the owner closes the pipe (its deadline) or sends SIGTERM/SIGINT/SIGHUP.
Its exit status is the command's (128+N when a signal N ended the command; 137 when the tree
was ended before the command exited). Standard library only, started without site-packages.
"""

from __future__ import annotations

import _signal as signal  # the C module: no enum import, a faster start
import ctypes
import os
import select
import sys

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36


def _prctl(option: int, value: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(option, value, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), f"prctl({option})")


def descendants(root: int) -> list[int]:
    """Live processes below `root`, from /proc (parent links); zombies are left to be reaped."""
    parent: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(b")") + 2 :].split()
        if fields[0] != b"Z":
            parent[int(name)] = int(fields[1])
    below, frontier = [], [root]
    while frontier:
        p = frontier.pop()
        kids = [c for c, pp in parent.items() if pp == p]
        below += kids
        frontier += kids
    return below


def reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def end_tree(pgid: int) -> None:
    """SIGKILL the command's group, then every descendant, until none is left."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        pass
    me = os.getpid()
    while True:
        reap()
        pids = descendants(me)
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        select.select([], [], [], 0.01)


def main(argv: list[str]) -> int:
    watch = int(argv[1])
    command = argv[2:]
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    stop_r, stop_w = os.pipe()  # signals become a readable fd, so one select waits for everything
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: os.write(stop_w, b"x"))
    if os.getppid() == 1:  # the owner died before the signal was armed
        return 137
    pid = os.fork()
    if pid == 0:
        try:
            os.setpgid(0, 0)
            os.close(watch)
            os.close(stop_r)
            os.close(stop_w)
            # Python ignores SIGPIPE and SIGXFSZ, and an ignored signal stays ignored across exec
            for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGPIPE, signal.SIGXFSZ):
                signal.signal(sig, signal.SIG_DFL)
            os.execvp(command[0], command)
        except OSError as e:
            os.write(2, f"sandbox: cannot run {command[0]}: {e.strerror}\n".encode())
        os._exit(127)
    try:
        os.setpgid(pid, pid)
    except OSError:
        pass  # the child already did it, or already exited
    try:
        child, tick = [os.pidfd_open(pid)], None  # readable when the command exits
    except (OSError, AttributeError):  # Linux before 5.3: look every 50 ms
        child, tick = [], 0.05
    status = None
    while status is None:
        ready, _, _ = select.select([*child, watch, stop_r], [], [], tick)
        done, raw = os.waitpid(pid, os.WNOHANG)
        if done:
            status = os.waitstatus_to_exitcode(raw)
            status = 128 - status if status < 0 else status
        elif watch in ready or stop_r in ready:  # the owner is gone, closed the pipe, or sent a signal
            break
    end_tree(pid)
    return 137 if status is None else status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
