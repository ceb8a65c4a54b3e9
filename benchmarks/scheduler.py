"""How busy does `pkagent run` keep the GPUs? The runner's own scheduling (experiments.experiment.execute,
the local executor, the GpuPool, each finished sample written and renamed into a run directory)
drives fake samples: a model call of a given latency (uniform between 0.5x and 1.5x), then a check
that holds world_size GPUs for a given time. Nothing else is faked.

    python benchmarks/scheduler.py                                  # the table of docs/scheduler_bench.md
    python benchmarks/scheduler.py --gpus 8 --world-size 2 --concurrency 32 --samples 400

For each setting it prints: GPU utilisation (GPU-seconds held by checks / (GPUs x wall time of the
whole run, ramp-up included)), how much of the GPU-busy time had model calls in flight at the same
moment (the overlap), the wall time against the GPU-bound floor (samples x check x world_size /
GPUs) and against running model call then check back to back on each GPU group.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent.solve import SolveConfig, SolveResult  # noqa: E402
from experiments.executors import LocalExecutor, Task  # noqa: E402
from experiments.experiment import Tally, execute  # noqa: E402
from sandbox import GpuPool  # noqa: E402


def bench(gpus: int, world_size: int, samples: int, concurrency: int, latency: float, check_s: float, seed: int = 0) -> dict:
    pool = GpuPool([[int(i != j) for j in range(gpus)] for i in range(gpus)])
    rng = random.Random(seed)
    latencies = [latency * rng.uniform(0.5, 1.5) for _ in range(samples)]
    llm, held, lock = [], [], threading.Lock()

    def fake_sample(task: Task, acquire) -> SolveResult:
        t0 = time.monotonic()
        time.sleep(latencies[task.sample])  # the model call: no GPU held
        t1 = time.monotonic()
        with acquire(world_size) as ids:  # the check: world_size GPUs, none shared
            t2 = time.monotonic()
            time.sleep(check_s)
            t3 = time.monotonic()
        with lock:
            llm.append((t0, t1))
            held.append((t2, t3, tuple(ids)))
        s = task.solve
        return SolveResult(problem=s.problem, model=s.model, mode=s.mode, status="completed", correct=True)

    with tempfile.TemporaryDirectory() as tmp:
        tasks = [
            Task(
                solve=SolveConfig(problem=f"p{k % 40}", model="fake:m", mode="zero-shot"),
                sample=k,
                dir=f"{tmp}/p{k % 40}/sample_{k}",
                tmp=f"{tmp}/p{k % 40}/.sample_{k}.tmp",
            )
            for k in range(samples)
        ]
        for t in tasks:
            Path(t.dir).parent.mkdir(parents=True, exist_ok=True)
        start = time.monotonic()
        tally = execute(tasks, LocalExecutor(concurrency, pool, work=fake_sample), concurrency, Tally(total=samples), None)
        wall = time.monotonic() - start
    assert tally.done == samples
    # no GPU was ever held by two samples at once
    for g in range(gpus):
        spans = sorted((a, b) for a, b, ids in held if g in ids)
        assert all(b1 <= a2 for (_, b1), (a2, _) in zip(spans, spans[1:])), f"GPU {g} shared"
    busy = sum((b - a) * world_size for a, b, _ in held)
    # GPU-busy time with a model call in flight: sample the timeline every millisecond
    step, overlapped, total = 1e-3, 0.0, 0.0
    t = start
    events_llm = sorted(llm)
    end = start + wall
    while t < end:
        n_gpu = sum(1 for a, b, _ in held if a <= t < b)
        if n_gpu:
            total += step
            if any(a <= t < b for a, b in events_llm if a <= t):
                overlapped += step
        t += step * 10  # every 10 ms is plenty for these durations
    groups = gpus // world_size
    return {
        "gpus": gpus,
        "world_size": world_size,
        "groups": groups,
        "samples": samples,
        "concurrency": concurrency,
        "latency_s": latency,
        "check_s": check_s,
        "wall_s": wall,
        "utilisation": busy / (gpus * wall),
        "overlap": overlapped / total if total else 0.0,
        "floor_s": samples * check_s * world_size / gpus,
        "serial_s": samples / groups * (latency + check_s),
    }


SETTINGS = [  # (gpus, world_size, concurrency): 4 and 8 GPU groups on 8 GPUs, and too few samples in flight
    (8, 2, 32),
    (8, 1, 64),
    (8, 2, 4),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpus", type=int)
    ap.add_argument("--world-size", type=int, default=2)
    ap.add_argument("--concurrency", type=int, default=32, help="samples in flight (llm_concurrency)")
    ap.add_argument("--samples", type=int, default=400)
    ap.add_argument("--latency", type=float, default=0.4, help="mean model latency, s")
    ap.add_argument("--check", type=float, default=0.1, help="check duration, s")
    a = ap.parse_args()
    settings = [(a.gpus, a.world_size, a.concurrency)] if a.gpus else SETTINGS
    print(f"{a.samples} samples, model latency {a.latency} s (x0.5..1.5), check {a.check} s\n")
    print(
        "| GPUs | world size | groups | in flight | wall s | GPU-bound floor s | call-then-check s | GPU utilisation | GPU time with model calls in flight |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for gpus, ws, conc in settings:
        r = bench(gpus, ws, a.samples, conc, a.latency, a.check)
        print(
            f"| {gpus} | {ws} | {r['groups']} | {conc} | {r['wall_s']:.2f} | {r['floor_s']:.2f} | {r['serial_s']:.2f} | "
            f"{r['utilisation']:.1%} | {r['overlap']:.1%} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
