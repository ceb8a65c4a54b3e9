"""Deadlines for tests that hold on a busy machine.

A test never waits on a fixed wall clock: a subprocess or a wait is given up only after it has
made no progress (no output, no file written under the folders it works in) for `quiet_s`
seconds, and a time limit handed to the code under test (a check's timeout) is scaled by how
slowly this machine runs right now (`SLOWDOWN`, measured once per test session: a fixed piece of
Python timed against a quiet core, and the load average per CPU; at least 1;
PKAGENT_TEST_SLOWDOWN overrides it)."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

QUIET_CORE_S = 0.06  # the loop below on an idle modern x86 core, Python 3.11 (an estimate: it only lengthens deadlines)


def _measure() -> float:
    runs = []
    for _ in range(3):
        t, x = time.perf_counter(), 0
        for i in range(1_000_000):
            x += i & 7
        runs.append(time.perf_counter() - t)
    load = os.getloadavg()[0] / (os.cpu_count() or 1)
    return round(min(10.0, max(1.0, sorted(runs)[1] / QUIET_CORE_S, load)), 2)


def slowdown() -> float:
    if "PKAGENT_TEST_SLOWDOWN" not in os.environ:  # children (and later calls) reuse the measurement
        os.environ["PKAGENT_TEST_SLOWDOWN"] = str(_measure())
    return float(os.environ["PKAGENT_TEST_SLOWDOWN"])


def scaled(seconds: float) -> float:
    """A time limit for the code under test, longer on a slow or busy machine."""
    return seconds * slowdown()


def _footprint(paths: Iterable[Path]) -> tuple:
    """What changes when a process writes under `paths`: the number of files and the newest mtime."""
    n, newest = 0, 0.0
    for root in paths:
        for dirpath, _, files in os.walk(root):
            for f in files:
                try:
                    newest = max(newest, os.stat(os.path.join(dirpath, f)).st_mtime)
                except OSError:
                    continue
                n += 1
    return n, newest


class Progress:
    """The last moment something happened: output read, or files changed under `watch`."""

    def __init__(self, watch: Iterable[Path | str] = ()):
        self.watch = [Path(p) for p in watch]
        self.last = time.monotonic()
        self._seen = _footprint(self.watch)

    def poke(self) -> None:
        self.last = time.monotonic()

    def quiet_for(self) -> float:
        now = _footprint(self.watch)
        if now != self._seen:
            self._seen = now
            self.poke()
        return time.monotonic() - self.last


def wait_until(
    done: Callable[[], bool], *, proc: subprocess.Popen | None = None, watch: Iterable[Path | str] = (), quiet_s: float = 120
) -> bool:
    """Wait until `done()`; give up (False) when `proc` has exited or nothing changed under `watch`
    for `quiet_s` seconds."""
    progress = Progress(watch)
    while not done():
        if (proc is not None and proc.poll() is not None) or progress.quiet_for() > quiet_s:
            return done()
        time.sleep(0.2)
    return True


def run(
    cmd: list[str],
    *,
    quiet_s: float = 120,
    watch: Iterable[Path | str] = (),
    text: bool = False,
    input: str | bytes | None = None,
    **kw,
) -> subprocess.CompletedProcess:
    """subprocess.run(cmd, capture_output=True) that kills the command's process group only after it
    has printed nothing and written nothing under `watch` for `quiet_s` seconds (then raises
    subprocess.TimeoutExpired with what it printed)."""
    kw.pop("capture_output", None)
    proc = subprocess.Popen(
        cmd,
        stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        **kw,
    )
    progress = Progress(watch)
    chunks: dict[str, list[bytes]] = {"out": [], "err": []}

    def pump(stream, into):
        for block in iter(lambda: stream.read1(65536), b""):
            into.append(block)
            progress.poke()

    readers = [
        threading.Thread(target=pump, args=(s, chunks[k]), daemon=True) for k, s in (("out", proc.stdout), ("err", proc.stderr))
    ]
    for r in readers:
        r.start()
    if input is not None:
        proc.stdin.write(input.encode() if isinstance(input, str) else input)
        proc.stdin.close()
    timed_out = False
    while proc.poll() is None:
        if progress.quiet_for() > quiet_s:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            timed_out = True
            break
        time.sleep(0.2)
    for r in readers:
        r.join()
    out, err = b"".join(chunks["out"]), b"".join(chunks["err"])
    if text:
        out, err = out.decode(errors="replace"), err.decode(errors="replace")
    if timed_out:
        raise subprocess.TimeoutExpired(cmd, quiet_s, output=out, stderr=err)
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)
