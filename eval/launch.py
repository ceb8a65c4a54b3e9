"""The launcher of a check's runners: `python -m eval.launch SPEC`. Standard library only, so
that it starts in milliseconds; it starts `python -m eval.runner SPEC RANK` for every rank.

Inside bubblewrap the ranks share the sandbox's namespaces and die with it. Outside it this
process is a subreaper, so a child that leaves its process group (setsid) is still below it,
and it kills everything below it when the ranks are done, on SIGTERM, and when the check that
started it dies.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
from typing import Any


def die_with_parent() -> None:
    """SIGKILL this process when the one that started it dies (Linux; best effort elsewhere);
    exit at once if it is already gone (PKAGENT_PARENT_PID names it)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    expected = os.environ.get("PKAGENT_PARENT_PID")
    if expected and os.getppid() != int(expected):
        os._exit(1)


def descendants(pid: int) -> list[int]:
    """Every live process below `pid` (Linux /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                ppid = int(open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def main(spec_path: str) -> None:
    """Start every rank as a child, each with its socket (PKAGENT_RUNNER_FDS), and write how each
    ended to logs/rankN.exit. Inside bubblewrap the ranks share its namespaces and the sandbox
    ends them all; outside it this process is a subreaper (a child that leaves its process group
    is still below it) and kills everything below it when the ranks are done, on SIGTERM, and
    when the check that started it dies."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(36, 1)  # PR_SET_CHILD_SUBREAPER
    libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG: a handler runs, unlike SIGKILL's
    expected = os.environ.pop("PKAGENT_PARENT_PID", None)
    if expected and os.getppid() != int(expected):
        os._exit(1)

    def end(*_: Any) -> None:
        for pid in descendants(os.getpid()):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        os._exit(0)

    signal.signal(signal.SIGTERM, end)
    fds = [int(f) for f in os.environ.pop("PKAGENT_RUNNER_FDS").split(",")]
    logs = os.path.join(os.path.dirname(spec_path), "logs")
    ranks = {}
    for rank, fd in enumerate(fds):
        env = dict(
            os.environ, PKAGENT_RUNNER_FD=str(fd), RANK=str(rank), LOCAL_RANK=str(rank), PKAGENT_PARENT_PID=str(os.getpid())
        )
        with open(os.path.join(logs, f"rank{rank}.log"), "ab") as log:
            p = subprocess.Popen(
                [sys.executable, "-m", "eval.runner", spec_path, str(rank)],
                env=env,
                pass_fds=(fd,),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        ranks[p.pid] = rank
        os.close(fd)
    while ranks:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            break
        if pid in ranks:
            with open(os.path.join(logs, f"rank{ranks.pop(pid)}.exit"), "w") as f:
                f.write(str(os.waitstatus_to_exitcode(status)))
    end()


if __name__ == "__main__":
    main(sys.argv[1])
