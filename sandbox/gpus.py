"""The GPU pool: each sample gets a disjoint set of GPUs, NVLink-joined where the topology allows.

pool = GpuPool.from_machine()        # or GpuPool(topology) with a matrix of NVLink counts
with pool.acquire(2) as gpus:        # blocks until two GPUs are free; [] for acquire(0)
    ...                              # the GPUs go back on exit, whatever the exit
"""

from __future__ import annotations

import itertools
import os
import re
import subprocess
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager


class GpuPool:
    def __init__(self, topology: Sequence[Sequence[int]], gpus: Sequence[int] | None = None):
        """topology[i][j]: NVLinks between GPUs i and j (0: none; the diagonal is ignored).
        `gpus`: the indices the pool may hand out (default: all of the topology)."""
        n = len(topology)
        if any(len(row) != n for row in topology):
            raise ValueError(f"GPU topology must be a square matrix, got rows of lengths {[len(r) for r in topology]}")
        self.links = [list(row) for row in topology]
        self.gpus = sorted(range(n) if gpus is None else gpus)
        self.free = set(self.gpus)
        self.note = ""  # why the pool is empty, when it is
        self._cond = threading.Condition()

    @classmethod
    def from_machine(cls) -> GpuPool:
        """The GPUs of this machine from `nvidia-smi topo -m`, limited to CUDA_VISIBLE_DEVICES
        when that lists indices. No nvidia-smi, or no GPU: an empty pool that says why."""
        try:
            out = subprocess.run(["nvidia-smi", "topo", "-m"], capture_output=True, text=True, timeout=30)
            text = out.stdout if out.returncode == 0 else ""
            why = f"`nvidia-smi topo -m` failed: {(out.stderr or out.stdout).strip()[:200]}"
        except FileNotFoundError:
            text, why = "", "nvidia-smi not found: no NVIDIA driver here"
        except (OSError, subprocess.TimeoutExpired) as e:
            text, why = "", f"nvidia-smi cannot run ({type(e).__name__})"
        topology = parse_topology(text)
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
        gpus = None
        if re.fullmatch(r"\d+(,\d+)*", visible):
            gpus = [i for i in map(int, visible.split(",")) if i < len(topology)]
        pool = cls(topology, gpus)
        if not topology:
            pool.note = why if not text else "nvidia-smi lists no GPU"
        return pool

    def _score(self, gpus: tuple[int, ...]) -> tuple[int, int]:
        pairs = list(itertools.combinations(gpus, 2))
        joined = sum(1 for i, j in pairs if self.links[i][j] > 0)
        return joined, sum(self.links[i][j] for i, j in pairs)

    def _pick(self, n: int) -> list[int] | None:
        """The free n-set with the most NVLink-joined pairs, then the most links, then the lowest."""
        if len(self.free) < n:
            return None
        best = max(itertools.combinations(sorted(self.free), n), key=lambda s: (self._score(s), [-g for g in s]))
        return list(best)

    @contextmanager
    def acquire(self, n: int, timeout: float | None = None) -> Iterator[list[int]]:
        """n GPUs, waiting until they are free (TimeoutError after `timeout` seconds)."""
        if not 0 <= n <= len(self.gpus):
            why = f" ({self.note})" if self.note else ""
            raise ValueError(f"asked for {n} GPUs; this pool has {len(self.gpus)}{why}")
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while (got := self._pick(n)) is None:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise TimeoutError(f"no {n} free GPUs within {timeout} s ({len(self.free)} free)")
                self._cond.wait(left)
            self.free.difference_update(got)
        try:
            yield got
        finally:
            with self._cond:
                self.free.update(got)
                self._cond.notify_all()


def parse_topology(text: str) -> list[list[int]]:
    """NVLink counts between GPUs from the matrix `nvidia-smi topo -m` prints ("NV18": 18;
    X, PIX, PXB, PHB, NODE, SYS: 0)."""
    rows = {}
    for line in text.splitlines():
        cells = line.split()
        if cells and re.fullmatch(r"GPU\d+", cells[0]):
            rows[int(cells[0][3:])] = cells[1:]
    n = len(rows)
    if sorted(rows) != list(range(n)) or any(len(r) < n for r in rows.values()):
        return []
    return [[_links(rows[i][j]) if i != j else 0 for j in range(n)] for i in range(n)]


def _links(cell: str) -> int:
    m = re.fullmatch(r"NV(\d+)", cell)
    return int(m.group(1)) if m else 0
