"""The GPU pool on fake topologies of 2, 4 and 8 GPUs, and reading a machine's topology."""

from __future__ import annotations

import random
import threading
import time

import pytest

from sandbox import GpuPool
from sandbox.gpus import parse_topology


def full(n: int, links: int = 18) -> list[list[int]]:
    return [[0 if i == j else links for j in range(n)] for i in range(n)]


def islands(*groups: list[int], links: int = 4) -> list[list[int]]:
    """NVLink inside each group, nothing (PCIe) between groups."""
    n = sum(len(g) for g in groups)
    m = [[0] * n for _ in range(n)]
    for g in groups:
        for i in g:
            for j in g:
                if i != j:
                    m[i][j] = links
    return m


# Two H200 with NV18 between them, as `nvidia-smi topo -m` prints it.
TOPO_2 = """\
\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID
GPU0\t X \tNV18\t0-47\t0\t\tN/A
GPU1\tNV18\t X \t0-47\t0\t\tN/A

Legend:

  X    = Self
  NV#  = Connection traversing a bonded set of # NVLinks
"""

# Eight GPUs, NVLink pairs (0,1) (2,3) (4,5) (6,7), PCIe/SYS otherwise, with NIC columns and rows.
TOPO_8 = """\
\tGPU0\tGPU1\tGPU2\tGPU3\tGPU4\tGPU5\tGPU6\tGPU7\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID
GPU0\t X \tNV4\tPXB\tPXB\tSYS\tSYS\tSYS\tSYS\tPXB\t0-31\t0\t\tN/A
GPU1\tNV4\t X \tPXB\tPXB\tSYS\tSYS\tSYS\tSYS\tPXB\t0-31\t0\t\tN/A
GPU2\tPXB\tPXB\t X \tNV4\tSYS\tSYS\tSYS\tSYS\tPIX\t0-31\t0\t\tN/A
GPU3\tPXB\tPXB\tNV4\t X \tSYS\tSYS\tSYS\tSYS\tPIX\t0-31\t0\t\tN/A
GPU4\tSYS\tSYS\tSYS\tSYS\t X \tNV4\tPXB\tPXB\tSYS\t32-63\t1\t\tN/A
GPU5\tSYS\tSYS\tSYS\tSYS\tNV4\t X \tPXB\tPXB\tSYS\t32-63\t1\t\tN/A
GPU6\tSYS\tSYS\tSYS\tSYS\tPXB\tPXB\t X \tNV4\tSYS\t32-63\t1\t\tN/A
GPU7\tSYS\tSYS\tSYS\tSYS\tPXB\tPXB\tNV4\t X \tSYS\t32-63\t1\t\tN/A
NIC0\tPXB\tPXB\tPIX\tPIX\tSYS\tSYS\tSYS\tSYS\t X

NIC Legend:

  NIC0: mlx5_0
"""


def test_parse_topology_of_two_and_eight_gpus():
    assert parse_topology(TOPO_2) == [[0, 18], [18, 0]]
    m = parse_topology(TOPO_8)
    assert len(m) == 8 and all(len(row) == 8 for row in m)
    linked = {(i, j) for i in range(8) for j in range(8) if m[i][j]}
    assert linked == {(0, 1), (1, 0), (2, 3), (3, 2), (4, 5), (5, 4), (6, 7), (7, 6)}
    assert m[0][1] == 4
    assert parse_topology("") == [] and parse_topology("No devices were found") == []


def test_two_gpus_one_sample_at_a_time():
    pool = GpuPool(parse_topology(TOPO_2))
    with pool.acquire(2) as gpus:
        assert gpus == [0, 1] and pool.free == set()
    assert pool.free == {0, 1}
    with pool.acquire(0) as none:
        assert none == []


def test_four_gpus_prefers_nvlink_pairs_over_lowest_indices():
    pool = GpuPool(islands([0, 2], [1, 3]))
    with pool.acquire(2) as a, pool.acquire(2) as b:
        assert a == [0, 2] and b == [1, 3]


def test_eight_gpus_keeps_sets_inside_nvlink_islands():
    pool = GpuPool(islands([0, 1, 2, 3], [4, 5, 6, 7]))
    with pool.acquire(2) as a:
        with pool.acquire(4) as b:
            assert a == [0, 1] and b == [4, 5, 6, 7]
            with pool.acquire(2) as c:
                assert c == [2, 3]
    pool = GpuPool(parse_topology(TOPO_8))
    with pool.acquire(2) as a, pool.acquire(2) as b, pool.acquire(1) as c, pool.acquire(2) as d:
        assert a == [0, 1] and b == [2, 3] and c == [4] and d == [6, 7]


def test_sets_are_disjoint_under_concurrency_and_all_come_back():
    pool = GpuPool(full(8))
    held: set[int] = set()
    lock = threading.Lock()
    errors: list[str] = []

    def sample(seed: int) -> None:
        rng = random.Random(seed)
        for _ in range(20):
            n = rng.choice([1, 2, 4, 8])
            with pool.acquire(n) as gpus:
                with lock:
                    if held & set(gpus) or len(gpus) != n:
                        errors.append(f"{gpus} overlaps {held}")
                    held.update(gpus)
                time.sleep(rng.random() / 500)
                with lock:
                    held.difference_update(gpus)

    threads = [threading.Thread(target=sample, args=(s,)) for s in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads) and errors == []
    assert pool.free == set(range(8))


def test_blocks_until_gpus_come_back():
    pool = GpuPool(full(2))
    got: list[list[int]] = []

    def waiter() -> None:
        with pool.acquire(1) as gpus:
            got.append(gpus)

    with pool.acquire(2):
        t = threading.Thread(target=waiter)
        t.start()
        t.join(0.3)
        assert t.is_alive() and got == []
    t.join(5)
    assert got == [[0]]
    with pool.acquire(2), pytest.raises(TimeoutError, match="no 1 free GPUs within 0.1 s"):
        with pool.acquire(1, timeout=0.1):
            pass


@pytest.mark.parametrize("exc", [RuntimeError, KeyboardInterrupt, TimeoutError])
def test_gpus_come_back_whatever_ends_the_sample(exc):
    pool = GpuPool(full(4))
    with pytest.raises(exc):
        with pool.acquire(3):
            raise exc()
    assert pool.free == {0, 1, 2, 3}


def test_impossible_requests_fail_at_once():
    pool = GpuPool(full(2))
    with pytest.raises(ValueError, match="asked for 3 GPUs; this pool has 2"):
        with pool.acquire(3):
            pass
    with pytest.raises(ValueError, match="square matrix"):
        GpuPool([[0, 1], [1]])


def fake_nvidia_smi(tmp_path, monkeypatch, text: str, rc: int = 0) -> None:
    (tmp_path / "topo.txt").write_text(text)
    script = tmp_path / "nvidia-smi"
    script.write_text(f"#!/bin/sh\ncat {tmp_path}/topo.txt\nexit {rc}\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")


def test_from_machine_reads_nvidia_smi(tmp_path, monkeypatch):
    fake_nvidia_smi(tmp_path, monkeypatch, TOPO_8)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    pool = GpuPool.from_machine()
    assert pool.gpus == list(range(8))
    with pool.acquire(2) as gpus:
        assert gpus == [0, 1]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,2,3")  # the parent was given three GPUs
    pool = GpuPool.from_machine()
    assert pool.gpus == [1, 2, 3]
    with pool.acquire(2) as gpus:
        assert gpus == [2, 3]


def test_from_machine_without_gpus_falls_back_to_an_empty_pool(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi
    pool = GpuPool.from_machine()
    assert pool.gpus == []
    with pool.acquire(0) as gpus:
        assert gpus == []
    with pytest.raises(ValueError, match="nvidia-smi not found"):
        with pool.acquire(1):
            pass
    fake_nvidia_smi(tmp_path, monkeypatch, "NVIDIA-SMI has failed because it couldn't communicate with the driver", rc=9)
    with pytest.raises(ValueError, match="couldn't communicate with the driver"):
        with GpuPool.from_machine().acquire(1):
            pass
