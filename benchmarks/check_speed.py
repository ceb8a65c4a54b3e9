"""How fast and how steady is the checker? On the GPUs of this machine:

1. a warm check (5 trials + --perf) of each given collective, end to end, with its phases;
2. the same check again: the two speedups must agree within 5 %;
3. the reference timed by a plain CUDA-event loop written here, separately from the checker:
   the checker's reference time must agree with it within 5 %.

    python benchmarks/check_speed.py --problems all_reduce all_gather --out speed.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from eval.check import check  # noqa: E402
from eval.cli import candidate_source  # noqa: E402
from eval.problem import load_problem  # noqa: E402


def _plain_loop(rank: int, world: int, problem_id: str, port: int, size: float, q) -> None:
    """Copies of the inputs, 20 warm-up calls, then repetitions of 50 calls between two events."""
    torch.cuda.set_device(rank)
    dist.init_process_group(
        "nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world, device_id=torch.device("cuda", rank)
    )
    p = load_problem(problem_id)
    copies = [p.make_inputs(rank, world, 7 + i, "cuda", size) for i in range(4)]
    for i in range(20):
        p.reference(*copies[i % 4])
    reps = []
    for _ in range(15):
        dist.barrier()
        torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for i in range(50):
            p.reference(*copies[i % 4])
        b.record()
        b.synchronize()
        reps.append(a.elapsed_time(b) / 50)
    q.put((rank, statistics.median(reps)))
    dist.destroy_process_group()


def plain_event_loop(problem_id: str, world: int, size: float) -> float:
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    port = 29000 + os.getpid() % 1000
    procs = [ctx.Process(target=_plain_loop, args=(r, world, problem_id, port, size, q)) for r in range(world)]
    for p in procs:
        p.start()
    out = [q.get(timeout=300) for _ in procs]
    for p in procs:
        p.join()
    return max(ms for _, ms in out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--problems", nargs="+", default=["all_reduce", "all_gather", "reduce_scatter", "all_to_all"])
    ap.add_argument("--world-size", type=int, default=2)
    ap.add_argument("--size", type=float, default=1.0)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    rows = []
    tmp = Path(tempfile.mkdtemp())
    for pid in args.problems:
        cand = tmp / f"{pid}.py"
        cand.write_text(candidate_source(load_problem(pid)))
        runs = []
        for _ in range(2):
            t0 = time.perf_counter()
            r = check(cand, pid, world_size=args.world_size, device="cuda", trials=5, perf=True, size=args.size, timeout=300)
            wall = time.perf_counter() - t0
            assert r.status == "correct", (pid, r.status, r.message, r.log_tail[-2000:])
            runs.append((r, wall))
        plain = plain_event_loop(pid, args.world_size, args.size)
        (r1, w1), (r2, w2) = runs
        row = {
            "problem": pid,
            "wall_s": [round(w1, 2), round(w2, 2)],
            "phases_s": [r.phases.model_dump() for r, _ in runs],
            "speedups": [r1.perf.speedup, r2.perf.speedup],
            "speedup_spread_pct": abs(r1.perf.speedup - r2.perf.speedup) / r1.perf.speedup * 100,
            "checker_reference_ms": [r1.perf.reference.median_ms, r2.perf.reference.median_ms],
            "plain_loop_reference_ms": plain,
            "checker_vs_plain_pct": (r1.perf.reference.median_ms - plain) / plain * 100,
        }
        rows.append(row)
        print(
            f"{pid:15s} wall {w1:5.1f}/{w2:5.1f} s  (start-up {r1.phases.startup_s:.1f}, correctness {r1.phases.correctness_s:.1f}, "
            f"timing {r1.phases.timing_s:.1f})  speedups {r1.perf.speedup:.3f}/{r2.perf.speedup:.3f} "
            f"(spread {row['speedup_spread_pct']:.1f}%)  reference: checker {r1.perf.reference.median_ms * 1e3:.1f} us, "
            f"plain loop {plain * 1e3:.1f} us ({row['checker_vs_plain_pct']:+.1f}%)",
            flush=True,
        )
    if args.out:
        args.out.write_text(
            json.dumps(
                {
                    "date": time.strftime("%Y-%m-%d"),
                    "gpu": torch.cuda.get_device_name(0),
                    "world_size": args.world_size,
                    "size": args.size,
                    "rows": rows,
                },
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
