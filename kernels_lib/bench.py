"""Times the reference kernels of kernels_lib/examples against NCCL and PyTorch's symmetric-memory
ops, one process per GPU, and writes a table (markdown + JSON).

Each implementation is timed two ways, both on rotated input sets (3), median over 10 batches
per rank, then the maximum over ranks:
- eager: warm-up calls, then batches of calls issued from Python back to back, each batch between
  two CUDA events (launch overhead included where it dominates; host_us is the CPU time per call
  spent issuing them);
- graph: the same calls captured once as a CUDA graph and each batch a replay between two events:
  the GPU-only time, with no Python per call (our kernels read their epoch from device memory, so
  replays stay correct: their replayed outputs are checked too). Where a capture fails, why.
Every implementation's output is compared with NCCL's first (atol = rtol = 1e-2 on bf16).
A floor is judged on the graph time where our kernel captured correctly, else on the eager time;
"x NCCL" and "x torch" compare like with like (eager with eager, graph with graph).
Bus bandwidth follows nccl-tests: all-reduce 2 (W-1)/W * bytes / t; all-gather, reduce-scatter
and all-to-all (W-1)/W * total bytes / t.

    python -m kernels_lib.bench --out docs      (or: pkagent bench-lib)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

KIB, MIB, GIB = 1024, 1024**2, 1024**3
ROT = 3

# The floors: (op, bytes per rank) -> (kind, value); kind "us" = at most, "busbw" = at least GB/s.
FLOORS = {
    ("all_reduce", 16 * KIB): ("us", 8.0),
    ("all_reduce", 1 * MIB): ("us", 10.0),
    ("all_reduce", 64 * MIB): ("us", 200.0),
    ("all_reduce", 1 * GIB): ("busbw", 360.0),
    ("all_gather", 64 * MIB): ("busbw", 340.0),
    ("reduce_scatter", 64 * MIB): ("busbw", 340.0),
    ("all_to_all", 64 * MIB): ("busbw", 320.0),
    ("ag_gemm", 8192): ("us", 1450.0),
    ("gemm_rs", 8192): ("us", 800.0),
}
FLOORS_WORLD = 2  # the floors are for two H200s; at other world sizes no row is judged
# Rows whose floor also asks to beat torch's fastest symmetric-memory op measured in the same run.
BEAT_TORCH = {("all_reduce", 16 * KIB), ("ag_gemm", 8192), ("gemm_rs", 8192)}

DEFAULT_SIZES = {
    "all_reduce": [16 * KIB, 256 * KIB, 1 * MIB, 16 * MIB, 64 * MIB, 1 * GIB],
    "all_gather": [1 * MIB, 64 * MIB],
    "reduce_scatter": [1 * MIB, 64 * MIB],
    "all_to_all": [1 * MIB, 64 * MIB],
    "ag_gemm": [8192],
    "gemm_rs": [8192],
}


def _iters(nbytes: int) -> tuple[int, int]:
    if nbytes <= 4 * MIB:
        return 50, 300
    if nbytes <= 128 * MIB:
        return 10, 60
    return 3, 20


def _time(fn, sets, warmup: int, iters: int, batches: int = 10) -> dict:
    """Median over `batches` of (CUDA-event time of `iters // batches` calls back to back) / calls:
    the time per call in steady state, launch overhead included where it dominates. host_us is
    the CPU time per call spent issuing them."""
    import torch
    import torch.distributed as dist

    for i in range(warmup):
        fn(*sets[i % len(sets)])
    torch.cuda.synchronize()
    dist.barrier()
    torch.cuda.synchronize()
    per = max(1, iters // batches)
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(batches)]
    host = 0.0
    for b, (s, e) in enumerate(ev):
        s.record()
        h0 = time.perf_counter()
        for i in range(per):
            fn(*sets[(b * per + i) % len(sets)])
        host += time.perf_counter() - h0
        e.record()
    torch.cuda.synchronize()
    t = sorted(s.elapsed_time(e) * 1000 / per for s, e in ev)
    med = statistics.median(t)
    v = torch.tensor(
        [med, t[len(t) // 10], t[(9 * len(t)) // 10], host * 1e6 / (per * batches)], device="cuda", dtype=torch.float64
    )
    dist.all_reduce(v, op=dist.ReduceOp.MAX)
    return {"us": v[0].item(), "p10_us": v[1].item(), "p90_us": v[2].item(), "host_us": v[3].item(), "calls": per * batches}


def capture_everywhere(fn, sets, calls: int) -> tuple:
    """(graph, outputs): `calls` calls of fn (call i on sets[i % len(sets)]) captured as one CUDA
    graph by eval.runner.capture_calls, on every rank. Raises where any rank could not capture:
    every rank raises then, so that none replays and waits for the others."""
    import torch
    import torch.distributed as dist

    from eval.runner import capture_calls

    err = None
    try:
        g, outs = capture_calls(fn, sets, calls, torch.device("cuda", torch.cuda.current_device()))
    except Exception as e:  # noqa: BLE001 - reported by every rank
        err = f"{type(e).__name__}: {e}"[:300]
    bad = torch.tensor([0.0 if err is None else 1.0], device="cuda")
    dist.all_reduce(bad, op=dist.ReduceOp.MAX)
    if bad.item():
        raise RuntimeError(err or "another rank could not capture")
    return g, outs


def _graph_time(fn, sets, iters: int, batches: int = 10) -> tuple[dict, list]:
    """(timing, outputs of the captured calls): `iters // batches` calls captured once as a CUDA
    graph (call i on sets[i % len(sets)]), each batch one replay between two CUDA events."""
    import torch
    import torch.distributed as dist

    per = max(1, iters // batches)
    g, outs = capture_everywhere(fn, sets, per)
    g.replay()
    torch.cuda.synchronize()
    dist.barrier()
    torch.cuda.synchronize()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(batches)]
    for s, e in ev:
        s.record()
        g.replay()
        e.record()
    torch.cuda.synchronize()
    t = sorted(s.elapsed_time(e) * 1000 / per for s, e in ev)
    v = torch.tensor([statistics.median(t), t[len(t) // 10], t[(9 * len(t)) // 10]], device="cuda", dtype=torch.float64)
    dist.all_reduce(v, op=dist.ReduceOp.MAX)
    return {"graph_us": v[0].item(), "graph_p10_us": v[1].item(), "graph_p90_us": v[2].item()}, outs


def _close(a, b) -> tuple[bool, float]:
    import torch

    a, b = a.float(), b.float()
    ok = bool(torch.allclose(a, b, atol=1e-2, rtol=1e-2))
    err = (a - b).abs().max().item()
    import torch.distributed as dist

    t = torch.tensor([0.0 if ok else 1.0, err], device="cuda", dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t[0].item() == 0.0, t[1].item()


def _symm_inputs(sets, group_name):
    import torch.distributed._symmetric_memory as symm_mem

    out = []
    for (x,) in sets:
        t = symm_mem.empty(*x.shape, dtype=x.dtype, device=x.device)
        symm_mem.rendezvous(t, group_name)
        t.copy_(x)
        out.append((t,))
    return out


def _impls(op: str, size: int, rank: int, w: int):
    """(sets, reference fn, [(name, kind, fn, sets or None)]) for one op and size."""
    import torch
    import torch.distributed as dist
    import torch.distributed._symmetric_memory  # noqa: F401  (registers torch.ops.symm_mem)

    from kernels_lib.examples import (
        ag_gemm,
        all_gather,
        all_reduce,
        all_reduce_one_shot,
        all_reduce_two_shot,
        all_to_all,
        gemm_rs,
        reduce_scatter,
    )

    g = torch.Generator(device="cuda")
    g.manual_seed(1234 + rank)
    gname = dist.group.WORLD.group_name

    def rnd(*shape, scale=1.0):
        return (torch.randn(shape, generator=g, device="cuda") * scale).to(torch.bfloat16)

    if op in ("all_reduce", "all_gather", "reduce_scatter", "all_to_all"):
        n = size // 2
        numel = n if op in ("all_reduce", "all_gather") else n * w
        sets = [(rnd(numel),) for _ in range(ROT)]
        if op == "all_reduce":

            def ref(x):
                o = x.clone()
                dist.all_reduce(o)
                return o

            nccl_sets = [(x.clone(),) for (x,) in sets]
            symm = _symm_inputs(sets, gname)
            outs = [torch.empty_like(sets[0][0])]
            impls = [
                ("kernels_lib one-shot", "ours", all_reduce_one_shot.solution, None),
                ("kernels_lib two-shot", "ours", all_reduce_two_shot.solution, None),
                ("kernels_lib by size", "ours", all_reduce.solution, None),
                ("NCCL all_reduce (in place)", "nccl", lambda x: (dist.all_reduce(x), x)[1], nccl_sets),
                (
                    "torch symm_mem one_shot_all_reduce",
                    "torch",
                    lambda x: torch.ops.symm_mem.one_shot_all_reduce(x, "sum", gname),
                    symm,
                ),
                (
                    "torch symm_mem two_shot_all_reduce_out",
                    "torch",
                    lambda x: torch.ops.symm_mem.two_shot_all_reduce_out(x, "sum", gname, outs[0]),
                    symm,
                ),
            ]
        elif op == "all_gather":
            outs = [torch.empty(n * w, dtype=torch.bfloat16, device="cuda")]

            def ref(x):
                o = torch.empty(x.numel() * w, dtype=x.dtype, device=x.device)
                dist.all_gather_into_tensor(o, x)
                return o

            impls = [
                ("kernels_lib all_gather (reg)", "ours", lambda x: all_gather.solution(x, "reg"), None),
                ("kernels_lib all_gather (tma)", "ours", lambda x: all_gather.solution(x, "tma"), None),
                ("NCCL all_gather_into_tensor", "nccl", lambda x: (dist.all_gather_into_tensor(outs[0], x), outs[0])[1], None),
            ]
        elif op == "reduce_scatter":
            outs = [torch.empty(n, dtype=torch.bfloat16, device="cuda")]

            def ref(x):
                o = torch.empty(x.numel() // w, dtype=x.dtype, device=x.device)
                dist.reduce_scatter_tensor(o, x)
                return o

            impls = [
                ("kernels_lib reduce_scatter (add)", "ours", lambda x: reduce_scatter.solution(x, "add"), None),
                ("kernels_lib reduce_scatter (reg)", "ours", lambda x: reduce_scatter.solution(x, "reg"), None),
                ("NCCL reduce_scatter_tensor", "nccl", lambda x: (dist.reduce_scatter_tensor(outs[0], x), outs[0])[1], None),
            ]
        else:
            outs = [torch.empty(n * w, dtype=torch.bfloat16, device="cuda")]

            def ref(x):
                o = torch.empty_like(x)
                dist.all_to_all_single(o, x)
                return o

            impls = [
                ("kernels_lib all_to_all", "ours", all_to_all.solution, None),
                ("NCCL all_to_all_single", "nccl", lambda x: (dist.all_to_all_single(outs[0], x), outs[0])[1], None),
            ]
        return sets, ref, impls
    m = k = nn = size
    if op == "ag_gemm":
        sets = [(rnd(m // w, k), rnd(k, nn, scale=k**-0.5)) for _ in range(ROT)]
        full = rnd(m, k)  # random, like the inputs (zeros or garbage would time differently)

        def ref(a, b):
            f = torch.empty((a.shape[0] * w, a.shape[1]), dtype=a.dtype, device=a.device)
            dist.all_gather_into_tensor(f, a)
            return f @ b

        impls = [
            ("kernels_lib ag_gemm", "ours", ag_gemm.solution, None),
            ("NCCL all_gather + matmul (unfused)", "nccl", ref, None),
            (
                "torch symm_mem fused_all_gather_matmul",
                "torch",
                lambda a, b: torch.ops.symm_mem.fused_all_gather_matmul(a, [b], 0, gname, return_A=False)[1][0],
                None,
            ),
            ("matmul alone (no communication)", "gemm", lambda a, b: torch.matmul(full, b), None),
        ]
        return sets, ref, impls
    sets = [(rnd(m, k // w), rnd(k // w, nn, scale=k**-0.5)) for _ in range(ROT)]

    def ref(a, b):
        p = a @ b
        o = torch.empty((p.shape[0] // w, p.shape[1]), dtype=a.dtype, device=a.device)
        dist.reduce_scatter_tensor(o, p)
        return o

    impls = [
        ("kernels_lib gemm_rs", "ours", gemm_rs.solution, None),
        ("NCCL matmul + reduce_scatter (unfused)", "nccl", ref, None),
        (
            "torch symm_mem fused_matmul_reduce_scatter",
            "torch",
            lambda a, b: torch.ops.symm_mem.fused_matmul_reduce_scatter(a, b, "sum", 0, gname),
            None,
        ),
        ("matmul alone (no communication)", "gemm", lambda a, b: a @ b, None),
    ]
    return sets, ref, impls


def _busbw(op: str, size: int, w: int, us: float) -> float | None:
    if op == "all_reduce":
        return 2 * (w - 1) / w * size / (us * 1e-6) / 1e9
    if op in ("all_gather", "reduce_scatter", "all_to_all"):
        return (w - 1) * size / (us * 1e-6) / 1e9  # (W-1)/W * (W * size)
    return None


def _worker(rank: int, w: int, port: int, ops: list, out_json: str) -> None:
    import torch
    import torch.distributed as dist

    os.environ.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=w, device_id=torch.device("cuda", rank))
    rows = []
    for op, size in ops:
        sets, ref, impls = _impls(op, size, rank, w)
        expect = ref(*sets[0])
        nbytes = size if op not in ("ag_gemm", "gemm_rs") else size * size * 2
        warm, iters = _iters(nbytes) if op not in ("ag_gemm", "gemm_rs") else (5, 20)
        for name, kind, fn, own_sets in impls:
            row = {"op": op, "size": size, "world": w, "impl": name, "kind": kind}
            try:
                s = own_sets or sets
                if kind != "gemm":
                    got = fn(*sets[0]) if own_sets is None else None
                    if own_sets is not None:  # baselines on their own copies: check on a fresh copy
                        got = fn(*s[0])
                    row["correct"], row["max_err"] = _close(got, expect)
                row.update(_time(fn, s, warm, iters))
            except Exception as e:  # a baseline that this torch lacks, or a failure of ours
                row["error"] = f"{type(e).__name__}: {e}"[:300]
            if "us" in row:
                try:
                    timing, outs = _graph_time(fn, s, iters)
                    row.update(timing)
                    if kind == "ours":  # replays must be right too (an epoch frozen in the graph would not be)
                        ok = [_close(outs[i], ref(*s[i]))[0] for i in range(min(len(s), len(outs)))]
                        row["graph_correct"] = all(ok)
                    del outs
                except Exception as e:  # noqa: BLE001
                    row["graph_error"] = f"{type(e).__name__}: {e}"[:300]
            bw = _busbw(op, size, w, _best(row)) if "us" in row else None
            if bw:
                row["busbw_GBps"] = bw
            rows.append(row)
            if rank == 0:
                print(json.dumps(row), flush=True)
        del sets, expect
        torch.cuda.empty_cache()
    if rank == 0:
        with open(out_json, "w") as f:
            json.dump(rows, f, indent=1)
    dist.barrier()
    dist.destroy_process_group()


def _best(r: dict) -> float:
    """The time a row is judged on: the graph replay's where it ran (and, for ours, was right)."""
    if "graph_us" in r and r.get("graph_correct", True):
        return r["graph_us"]
    return r["us"]


def _fmt_size(op: str, s: int) -> str:
    if op in ("ag_gemm", "gemm_rs"):
        return f"{s}^3"
    return f"{s // GIB} GiB" if s >= GIB else f"{s // MIB} MiB" if s >= MIB else f"{s // KIB} KiB"


def table(rows: list[dict]) -> str:
    """Markdown: one line per (op, size, our kernel), with the baselines' times and the ratios,
    eager and graph side by side."""
    out = [
        "| op | size per rank | kernel | eager us (p10-p90) | host us | graph us (p10-p90) | bus GB/s | NCCL us eager / graph "
        "| x NCCL eager / graph | torch symm_mem us eager / graph | x torch eager / graph | floor | met |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    keys = sorted(
        {(r["op"], r["size"]) for r in rows},
        key=lambda k: (list(DEFAULT_SIZES).index(k[0]) if k[0] in DEFAULT_SIZES else 99, k[1]),
    )

    def fastest(group, kind, key):
        return min((r[key] for r in group if r["kind"] == kind and r.get("correct", True) and key in r), default=None)

    def pair(a, b, fmt="{:.1f}"):
        return " / ".join("-" if v is None else fmt.format(v) for v in (a, b))

    def ratio(base, ours):
        return None if base is None or ours is None else base / ours

    for op, size in keys:
        group = [r for r in rows if r["op"] == op and r["size"] == size and "us" in r]
        nccl = (fastest(group, "nccl", "us"), fastest(group, "nccl", "graph_us"))
        torch_t = (fastest(group, "torch", "us"), fastest(group, "torch", "graph_us"))
        gemm = next((r["us"] for r in group if r["kind"] == "gemm"), None)
        for r in (r for r in group if r["kind"] == "ours"):
            graph_ok = "graph_us" in r and r.get("graph_correct", True)
            mine = (r["us"], r["graph_us"] if graph_ok else None)
            t = _best(r)
            floor = FLOORS.get((op, size)) if r.get("world", FLOORS_WORLD) == FLOORS_WORLD else None
            met, floor_s = "", ""
            if floor:
                kind, val = floor
                ok = t <= val if kind == "us" else (r.get("busbw_GBps") or 0) >= val
                floor_s = f"<= {val:g} us" if kind == "us" else f">= {val:g} GB/s"
                if (op, size) in BEAT_TORCH:
                    base = torch_t[1] if graph_ok and torch_t[1] is not None else torch_t[0]
                    ok = ok and base is not None and t < base
                    floor_s += ", < torch"
                met = ("yes" if ok else "no") + ("" if graph_ok else " (eager)")
            bw = f"{r['busbw_GBps']:.0f}" if r.get("busbw_GBps") else (f"GEMM alone {gemm:.0f} us" if gemm else "")
            note = "" if r.get("correct", True) else " WRONG"
            if "graph_us" in r and not r.get("graph_correct", True):
                graph_cell = f"{r['graph_us']:.1f} WRONG in replays"
            elif "graph_us" in r:
                graph_cell = f"{r['graph_us']:.1f} ({r['graph_p10_us']:.1f}-{r['graph_p90_us']:.1f})"
            else:
                graph_cell = "not captured: " + r.get("graph_error", "?")[:80].replace("|", "/")
            cells = [
                op,
                _fmt_size(op, size),
                r["impl"].replace("kernels_lib ", "") + note,
                f"{r['us']:.1f} ({r['p10_us']:.1f}-{r['p90_us']:.1f})",
                f"{r.get('host_us', 0):.1f}",
                graph_cell,
                bw,
                pair(*nccl),
                pair(ratio(nccl[0], mine[0]), ratio(nccl[1], mine[1]), "{:.2f}"),
                pair(*torch_t),
                pair(ratio(torch_t[0], mine[0]), ratio(torch_t[1], mine[1]), "{:.2f}"),
                floor_s,
                met,
            ]
            out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def run(world_size: int = 2, ops: list[str] | None = None, out_dir: str = ".", quick: bool = False) -> list[dict]:
    import socket

    import torch.multiprocessing as mp

    from kernels_lib import multicast

    os.environ.update(multicast.MULTICAST_OFF_ENV)
    names = ops or list(DEFAULT_SIZES)
    todo = [(op, s) for op in names for s in DEFAULT_SIZES[op]]
    if quick:
        todo = [(op, s) for op, s in todo if s <= 64 * MIB or op in ("ag_gemm", "gemm_rs")]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.makedirs(out_dir, exist_ok=True)
    out_json = os.path.join(out_dir, "kernels_lib_bench.json")
    t0 = time.time()
    mp.spawn(_worker, args=(world_size, port, todo, out_json), nprocs=world_size, join=True)
    rows = json.load(open(out_json))
    md = table(rows)
    with open(os.path.join(out_dir, "kernels_lib_bench_table.md"), "w") as f:
        f.write(md + "\n")
    print(md)
    print(f"bench: {len(rows)} timings in {time.time() - t0:.0f} s")
    return rows


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--world-size", type=int, default=2)
    ap.add_argument("--ops", default="")
    ap.add_argument("--out", default=".")
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    run(a.world_size, [o for o in a.ops.split(",") if o] or None, a.out, a.quick)
