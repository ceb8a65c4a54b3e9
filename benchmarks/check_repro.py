"""Do the checker's speedups reproduce? The same candidates checked N times back to back, at
sizes from launch-bound to bandwidth-bound: per (candidate, size), each run's speedup and 95 %
interval, the spread across runs (max / min - 1), whether every run's interval holds the other
runs' speedups, and the wall time of each check.

    python benchmarks/check_repro.py --runs 3 --sizes 1 0.001 --out docs/check_repro_w2.md
    python benchmarks/check_repro.py --kernels --sizes 1       # kernels_lib's kernels too
    python benchmarks/check_repro.py --graphs off ...          # calls timed one by one only
    python benchmarks/check_repro.py --world-size 1 ...        # one GPU: the host's share only

At --world-size 1 the collectives are the identity (NCCL's single-rank path): not a distributed
problem, so the suite does not list that size, and this benchmark lifts the restriction for
itself. What it shows is the host's part of the spread (launches, Python, the CPU's clock),
without the link.

Candidates: each basic collective's reference as its own candidate (a speedup of 1 is the
truth there), and with --kernels kernels_lib's example kernels against their problems.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from eval.check import check  # noqa: E402
from eval.cli import candidate_source  # noqa: E402
from eval.problem import load_problem  # noqa: E402

COLLECTIVES = ["all_reduce", "all_gather", "reduce_scatter", "all_to_all"]
KERNELS = {
    "all_reduce": "all_reduce",
    "all_reduce_one_shot": "all_reduce",
    "all_reduce_two_shot": "all_reduce",
    "all_gather": "all_gather",
    "reduce_scatter": "reduce_scatter",
    "all_to_all": "all_to_all",
    "ag_gemm": "ag_gemm",
    "gemm_rs": "gemm_rs",
}


def candidates(with_kernels: bool, tmp: Path) -> list[tuple[str, Path, str]]:
    out = []
    for pid in COLLECTIVES:
        path = tmp / f"{pid}_reference.py"
        path.write_text(candidate_source(load_problem(pid)))
        out.append((f"{pid} (reference)", path, pid))
    if with_kernels:
        out += [(f"kernels_lib {k}", ROOT / "kernels_lib" / "examples" / f"{k}.py", p) for k, p in KERNELS.items()]
    return out


def one_rank() -> None:
    """Let check() accept world size 1 for the problems this process checks (see the docstring)."""
    import dataclasses

    import eval.suites

    load = eval.suites.load

    def with_one(ref: str):
        p = load(ref)
        p.meta = dataclasses.replace(p.meta, world_sizes=(1, *p.meta.world_sizes))
        return p

    eval.suites.load = with_one


def walls(runs: list[dict]) -> str:
    return " / ".join(f"{x['wall_s']:.1f}" for x in runs)


def write(out: Path, rows: list[dict]) -> None:
    """The table (markdown) and the rows (the same name, .json), rewritten after every row so that
    a run cut short by a time limit keeps what it measured."""
    out.with_suffix(".json").write_text(
        json.dumps({"date": time.strftime("%Y-%m-%d"), "argv": sys.argv[1:], "rows": rows}, indent=1)
    )
    lines = [
        "| candidate | size | speedups (one per run) | 95 % intervals | spread | max dev from mean | intervals hold the others | ref per call | host-bound | CUDA graphs | wall per check |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        rs = row["runs"]
        speedups = " / ".join(f"{x['speedup']:.3f}" for x in rs)
        intervals = " ".join(f"[{x['ci'][0]:.3f}, {x['ci'][1]:.3f}]" for x in rs)
        lines.append(
            f"| {row['candidate']} | {row['size']:g} | {speedups} | {intervals} | {row['spread_pct']:.1f} % | "
            f"{row['max_dev_pct']:.1f} % | {'yes' if row['intervals_hold_others'] else 'no'} | {rs[0]['ref_ms'] * 1e3:.1f} us | "
            f"{'yes' if rs[0]['ref_host_bound'] else 'no'} | {'yes' if rs[0]['graphs'] else 'no'} | {walls(rs)} s |"
        )
    out.write_text("\n".join(lines) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--sizes", type=float, nargs="+", default=[1.0, 0.001])
    ap.add_argument("--kernels", action="store_true", help="kernels_lib's example kernels too")
    ap.add_argument("--only", nargs="*", help="only candidates whose label contains one of these")
    ap.add_argument("--world-size", type=int, default=2)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--time-budget", type=float, default=None)
    ap.add_argument("--graphs", default="auto", choices=["auto", "on", "off"], help="the checker's --graphs")
    ap.add_argument("--out", type=Path, help="a markdown table (and the same name .json)")
    args = ap.parse_args()
    if args.world_size == 1:
        one_rank()
    tmp = Path(tempfile.mkdtemp())
    rows = []
    for label, path, pid in candidates(args.kernels, tmp):
        if args.only and not any(o in label for o in args.only):
            continue
        for size in args.sizes:
            runs = []
            for _ in range(args.runs):
                t0 = time.perf_counter()
                r = check(
                    path,
                    pid,
                    world_size=args.world_size,
                    device=args.device,
                    trials=5,
                    perf=True,
                    size=size,
                    timeout=300,
                    time_budget_s=args.time_budget,
                    graphs=args.graphs,
                )
                wall = time.perf_counter() - t0
                if r.status != "correct":
                    print(f"{label} size {size}: {r.status}: {r.message}", flush=True)
                    break
                p = r.perf
                runs.append(
                    dict(
                        speedup=p.speedup,
                        ci=list(p.speedup_ci),
                        pairs=p.pairs,
                        wall_s=wall,
                        ref_ms=p.reference.median_ms,
                        cand_ms=p.candidate.median_ms,
                        calls=p.reference.calls_per_batch,
                        ref_host_bound=p.reference.host_bound,
                        cand_host_bound=p.candidate.host_bound,
                        graphs=p.graphs,
                        phases=r.phases.model_dump(),
                    )
                )
            if len(runs) < args.runs:
                continue
            s = [x["speedup"] for x in runs]
            covered = all(lo <= o <= hi for x in runs for lo, hi in [x["ci"]] for o in s)
            row = dict(
                candidate=label,
                problem=pid,
                size=size,
                runs=runs,
                spread_pct=(max(s) / min(s) - 1) * 100,
                max_dev_pct=max(abs(v / (sum(s) / len(s)) - 1) for v in s) * 100,
                intervals_hold_others=covered,
            )
            rows.append(row)
            print(
                f"{label:32s} size {size:<6g} speedups {' '.join(f'{v:.3f}' for v in s)}  spread {row['spread_pct']:.1f}%  "
                f"max dev {row['max_dev_pct']:.1f}%  intervals hold the others: {covered}  "
                f"ref {runs[0]['ref_ms'] * 1e3:.1f} us  graphs {runs[0]['graphs']}  wall {walls(runs)} s",
                flush=True,
            )
            if args.out:
                write(args.out, rows)


if __name__ == "__main__":
    main()
