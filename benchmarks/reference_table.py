"""How far is PyTorch + NCCL from the hardware? Every problem's reference, checked against
itself (it must be `correct`, speedup about 1), with its time and its fraction of the roofline.

    python benchmarks/reference_table.py --world-size 2 --out docs/reference_roofline.md
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from eval.check import check  # noqa: E402
from eval.cli import candidate_source  # noqa: E402
from eval.problem import all_problems  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--world-size", type=int, default=2)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--size", type=float, default=1.0)
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--hardware", default="h200_2")
    ap.add_argument("--category")
    ap.add_argument("--problems", nargs="*")
    ap.add_argument("--timeout", type=float, default=120, help="seconds a rank may go without progress")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp())
    rows = []
    probs = [
        p
        for p in all_problems(args.category)
        if args.world_size in p.meta.world_sizes and (not args.problems or p.id in args.problems)
    ]
    for i, p in enumerate(probs):
        cand = tmp / f"{p.id}.py"
        cand.write_text(candidate_source(p))
        r = check(
            cand,
            p.id,
            world_size=args.world_size,
            device=args.device,
            trials=args.trials,
            perf=True,
            size=args.size,
            timeout=args.timeout,
            hardware=args.hardware,
            batches=10,
        )
        row = {"id": p.id, "category": p.meta.category, "status": r.status, "wall_s": round(r.phases.total_s, 1)}
        if r.perf:
            row.update(
                reference_ms=r.perf.reference.median_ms,
                spread_ms=[r.perf.reference.min_ms, r.perf.reference.max_ms],
                speedup=r.perf.speedup,
                roofline_ms=r.perf.roofline_ms,
                fraction=r.perf.reference_roofline_fraction,
                bound=max(r.perf.roofline_terms_ms, key=r.perf.roofline_terms_ms.get) if r.perf.roofline_terms_ms else None,
            )
        else:
            row["message"] = r.message[:300]
        rows.append(row)
        frac = f"{row['fraction']:.0%}" if row.get("fraction") is not None else "-"
        print(
            f"[{i + 1}/{len(probs)}] {p.id:28s} {r.status:10s} ref {row.get('reference_ms', float('nan')):9.3f} ms  "
            f"roofline {frac:>5s}  self-speedup {row.get('speedup', float('nan')):.3f}  ({row['wall_s']} s)",
            flush=True,
        )
    if args.out:
        import torch

        gpu = torch.cuda.get_device_name(0) if args.device == "cuda" else "cpu"
        lines = [
            f"# Reference time and roofline fraction, world size {args.world_size}",
            "",
            f"Measured {time.strftime('%Y-%m-%d')} on {args.world_size}x {gpu}, hardware profile `{args.hardware}`, size {args.size:g}, with",
            "",
            "    python " + " ".join(["benchmarks/reference_table.py", *sys.argv[1:]]),
            "",
            "Each problem's reference is checked against itself (`pkagent problems show ID --as-candidate`),",
            f"{args.trials} correctness trials, then timed by the checker (median over 10 batches, max over ranks).",
            "The roofline is the largest of link bytes / link bandwidth, HBM bytes / HBM bandwidth and",
            "FLOPs / tensor rate from the problem's roofline() and the profile; `fraction` = roofline / reference time.",
            "",
            "| problem | category | status | reference (ms) | roofline (ms) | bound | fraction | self speedup |",
            "| --- | --- | --- | ---: | ---: | --- | ---: | ---: |",
        ]
        for r in rows:

            def f(key, fmt, r=r):
                return format(r[key], fmt) if r.get(key) is not None else "-"

            lines.append(
                f"| {r['id']} | {r['category']} | {r['status']} | {f('reference_ms', '.3f')} | {f('roofline_ms', '.3f')} | "
                f"{r.get('bound') or '-'} | {f('fraction', '.1%')} | {f('speedup', '.3f')} |"
            )
        fr = sorted(r["fraction"] for r in rows if r.get("fraction") is not None)
        if fr:
            below = sum(1 for f in fr if f < 0.5)
            lines += ["", f"Median fraction of the roofline: {fr[len(fr) // 2]:.1%}; {below} of {len(fr)} problems below 50 %."]
        args.out.write_text("\n".join(lines) + "\n")
        args.out.with_suffix(".json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
