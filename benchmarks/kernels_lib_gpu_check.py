"""GPU checks of kernels_lib, on 2+ GPUs (one process per GPU), writing one JSON report:

  build   a cold nvcc build of a small kernel (must take < 3 s) and the cache hit after it
  trap    a wait for a value nobody stores traps within its deadline and the process reports it
  prims   TMA load from a peer, TMA store to a peer, TMA store-with-add into a peer, barrier
  examples every reference kernel against its problem's reference() on random inputs, several
          calls in a row (fresh inputs each), at the problem's size, 1/64 and 1/4096 of it
  graphs  every reference kernel captured in a CUDA graph (3 calls back to back, after one eager
          warm-up call), replayed 3 times with the inputs refilled in place with new random
          values before each replay, every output checked after each replay; then eager calls
          again (the epochs the replays left in device memory must still agree)

    python benchmarks/kernels_lib_gpu_check.py --out DIR

It checks kernels_lib against the problem suite (eval/), so it sits above both rather than in
kernels_lib, which imports nothing of eval.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

PRIMS = r"""
#include <pk/pk.cuh>
using T = __nv_bfloat16;
// buf: [4][n] floats per rank: 0 = own data (rank*1000 + i), 1 = TMA-loaded from the next rank,
// 2 = written by the previous rank's TMA store, 3 = accumulated by every rank's TMA store_add.
extern "C" __global__ void prims(pk::pbuf<float> buf, pk::pbuf<uint32_t> flags, unsigned n, uint32_t* epochs) {
  const pk::block_epoch ep(epochs);
  const uint32_t epoch = ep.value;
  __shared__ __align__(128) float s[4096];
  __shared__ __align__(8) uint64_t bar;
  const int me = buf.rank, next = buf.peer_at(1), prev = buf.peer_at(buf.world - 1);
  float* mine = buf.local();
  for (unsigned i = threadIdx.x; i < n; i += blockDim.x) { mine[i] = me * 1000.0f + i; mine[3 * n + i] = 0.0f; }
  pk::barrier_block(flags, 0, 2 * epoch - 1);               // every rank's part 0 is written
  if (threadIdx.x == 0) {
    pk::tma::fence_global();
    pk::tma::bar_init(&bar);
    pk::tma::bar_expect(&bar, n * 4);
    pk::tma::load(s, buf[next], n * 4, &bar);               // peer global -> shared
    pk::tma::bar_wait(&bar, 0);
    pk::tma::store(mine + n, s, n * 4);                     // shared -> local global
    pk::tma::store(buf[next] + 2 * n, s, n * 4);            // shared -> peer global (next's own data back)
    for (int r = 0; r < buf.world; ++r) pk::tma::store_add(buf[r] + 3 * n, s, n * 4);  // += next's data
    pk::tma::commit();
    pk::tma::wait_writes();
  }
  pk::barrier_block(flags, 0, 2 * epoch);                   // everyone's stores have landed
  ep.done();
}
"""

TRAP = r"""
#include <pk/signal.cuh>
extern "C" __global__ void trap_wait(pk::pbuf<uint32_t> f, unsigned long long timeout_ns) {
  pk::wait(f, 3, 12345u, "impossible flag", timeout_ns);
}
"""


def _check_build(report: dict) -> None:
    import kernels_lib as kl

    with tempfile.TemporaryDirectory() as d:
        os.environ["PKAGENT_KERNEL_CACHE"] = d
        src = f'#include <pk/pk.cuh>\n// {time.time_ns()}\nextern "C" __global__ void add1(float* x) {{ x[threadIdx.x] += 1.0f; }}\n'
        cold = kl.compile_cubin(src, name="small")
        warm = kl.compile_cubin(src, name="small")
        del os.environ["PKAGENT_KERNEL_CACHE"]
    report["build"] = {
        "cold_s": round(cold.seconds, 3),
        "cached": warm.cached,
        "warm_s": round(warm.seconds, 4),
        "ok": cold.seconds < 3 and warm.cached,
    }


def _trap_child() -> None:  # one GPU, one rank: wait on a flag nobody stores
    import ctypes

    import torch

    import kernels_lib as kl

    flag = torch.zeros(16, dtype=torch.int32, device="cuda")
    k = kl.load(TRAP, name="trap").kernel("trap_wait")
    k(1, 32, [kl.pbuf([flag.data_ptr()], 0), ctypes.c_uint64(500_000_000)])
    torch.cuda.synchronize()  # raises: the kernel trapped
    print("NOT TRAPPED", flush=True)


def _check_trap(report: dict) -> None:
    t0 = time.time()
    try:
        r = subprocess.run([sys.executable, __file__, "--trap-child"], capture_output=True, text=True, timeout=60)
        out, code = r.stdout + r.stderr, r.returncode
    except subprocess.TimeoutExpired as e:
        out, code = f"HUNG: {e}", None
    dt = time.time() - t0
    ok = (
        code not in (0, None)
        and "pk: wait timed out: impossible flag" in out
        and "expected >= 12345" in out
        and "NOT TRAPPED" not in out
    )
    report["trap"] = {"ok": ok, "seconds": round(dt, 2), "exit_code": code, "output": out[-1500:]}


CASES = [  # (problem, example module, keyword arguments of its solution)
    ("all_reduce", "all_reduce_one_shot", {}),
    ("all_reduce", "all_reduce_two_shot", {}),
    ("all_reduce", "all_reduce", {}),  # by size: two-shot at the problem's size, one-shot at 1/64 and 1/4096
    ("all_gather", "all_gather", {}),
    ("all_gather", "all_gather", {"mechanism": "tma"}),
    ("all_gather", "all_gather", {"mechanism": "tma", "tile_kib": 12}),  # a tile that divides no size, under a TMA chunk
    ("reduce_scatter", "reduce_scatter", {}),  # "reg": push, reduce where it lands
    ("reduce_scatter", "reduce_scatter", {"mechanism": "add"}),  # TMA store-add at the owner
    ("all_to_all", "all_to_all", {}),
    ("ag_gemm", "ag_gemm", {}),
    ("gemm_rs", "gemm_rs", {}),
]
SIZES = (1.0, 1 / 64, 1 / 4096)


def _trial(prob, got, inputs, rank: int, w: int, **info) -> dict:
    """got against the problem's reference on inputs, agreed over the ranks (worst of them)."""
    import torch
    import torch.distributed as dist

    want = prob.reference(*inputs)
    atol, rtol = prob.tolerances(want.dtype)
    ok = got.shape == want.shape and bool(torch.allclose(got.float(), want.float(), atol=atol, rtol=rtol))
    err = (got.float() - want.float()).abs().max().item() if got.shape == want.shape else float("inf")
    flag = torch.tensor([0.0 if ok else 1.0, err], device="cuda", dtype=torch.float64)
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return {**info, "numel": int(inputs[0].numel()), "ok": flag[0].item() == 0, "max_err": flag[1].item()}


def _eager_trials(prob, solve, rank: int, w: int, size: float, trials: list) -> None:
    """Three calls in a row with fresh inputs: consecutive epochs, both buffer parities."""
    for seed in (1, 2, 3):
        inputs = prob.make_inputs(rank, w, seed, device="cuda", size=size)
        trials.append(_trial(prob, solve(*inputs), inputs, rank, w, size=size, seed=seed))


def _graph_trials(prob, solve, rank: int, w: int, size: float, trials: list, calls: int = 3, replays: int = 3) -> None:
    """`calls` calls captured in one CUDA graph (kernels_lib.bench.capture_everywhere: after an
    eager warm-up call on a side stream, as torch's docs ask), replayed `replays` times with the
    inputs refilled in place before each replay (every output checked after each), then two
    eager calls on fresh inputs."""
    from kernels_lib.bench import capture_everywhere

    inputs = prob.make_inputs(rank, w, 10, device="cuda", size=size)
    graph, outs = capture_everywhere(solve, [inputs], calls)
    for r in range(replays):
        fresh = prob.make_inputs(rank, w, 20 + r, device="cuda", size=size)
        for t, f in zip(inputs, fresh):
            t.copy_(f)
        graph.replay()
        for c, got in enumerate(outs):
            trials.append(_trial(prob, got, inputs, rank, w, size=size, replay=r, call=c))
    del graph, outs
    for seed in (30, 31):
        inputs = prob.make_inputs(rank, w, seed, device="cuda", size=size)
        trials.append(_trial(prob, solve(*inputs), inputs, rank, w, size=size, seed=seed, after_graph=True))


def _rank_main(rank: int, w: int, port: int, out_path: str) -> None:
    import ctypes

    import torch
    import torch.distributed as dist

    import kernels_lib as kl
    from eval.problem import load_problem

    os.environ.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=w, device_id=torch.device("cuda", rank))
    res: dict = {"prims": {}, "examples": {}}

    try:  # primitives
        n = 4096
        buf = kl.symm_buffer((4, n), torch.float32, tag="prims")
        fl = kl.flags(64, tag="prims")
        k = kl.load(PRIMS, name="prims").kernel("prims")
        epochs = torch.zeros(1, dtype=torch.int32, device="cuda")
        for _ in range(2):
            k(1, 256, [buf.pbuf(), fl.pbuf(), ctypes.c_uint32(n), epochs])
            torch.cuda.synchronize()
        t = buf.tensor
        i = torch.arange(n, device="cuda", dtype=torch.float32)
        nxt, me = (rank + 1) % w, rank
        want = {
            "tma_load_from_peer": nxt * 1000.0 + i,
            "tma_store_to_peer": me * 1000.0 + i,  # the previous rank stored my data back to me
            "tma_store_add_to_peers": sum(((r + 1) % w) * 1000.0 + i for r in range(w)),
        }
        got = {"tma_load_from_peer": t[1], "tma_store_to_peer": t[2], "tma_store_add_to_peers": t[3]}
        for name in want:
            res["prims"][name] = bool(torch.equal(got[name], want[name]))
        res["prims"]["barrier"] = True
        res["prims"]["block_epoch"] = epochs.item() == 2
    except Exception as ex:
        res["prims"]["error"] = f"{type(ex).__name__}: {ex}"[:500]

    import importlib

    res["graphs"] = {}
    for pid, ex_name, kw in CASES:
        label = ex_name + ("" if not kw else f"[{','.join(f'{k}={v}' for k, v in kw.items())}]")
        prob = load_problem(pid)
        mod = importlib.import_module(f"kernels_lib.examples.{ex_name}")
        solve = functools.partial(mod.solution, **kw)
        for section, check in (("examples", _eager_trials), ("graphs", _graph_trials)):
            trials: list = []
            try:
                for size in SIZES:
                    check(prob, solve, rank, w, size, trials)
                res[section][label] = {"ok": all(t["ok"] for t in trials), "trials": trials}
            except Exception as ex:
                res[section][label] = {"ok": False, "error": f"{type(ex).__name__}: {ex}"[:800], "trials": trials}
            if rank == 0:
                print(section, label, json.dumps(res[section][label])[:300], flush=True)
    if rank == 0:
        json.dump(res, open(out_path, "w"), indent=1)
    dist.barrier()
    dist.destroy_process_group()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=".")
    ap.add_argument("--world-size", type=int, default=2)
    ap.add_argument("--trap-child", action="store_true")
    a = ap.parse_args()
    if a.trap_child:
        return _trap_child()
    import socket

    import torch.multiprocessing as mp

    from kernels_lib import multicast

    os.environ.update(multicast.MULTICAST_OFF_ENV)
    report: dict = {}
    _check_build(report)
    print("build", report["build"], flush=True)
    _check_trap(report)
    print("trap", {k: v for k, v in report["trap"].items() if k != "output"}, flush=True)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    part = os.path.join(a.out, "gpu_check_ranks.json")
    mp.spawn(_rank_main, args=(a.world_size, port, part), nprocs=a.world_size, join=True)
    report.update(json.load(open(part)))
    report["ok"] = bool(
        report["build"]["ok"]
        and report["trap"]["ok"]
        and all(v is True for v in report["prims"].values())
        and all(v["ok"] for v in report["examples"].values())
        and all(v["ok"] for v in report["graphs"].values())
    )
    json.dump(report, open(os.path.join(a.out, "gpu_check.json"), "w"), indent=1)
    print("prims", report["prims"])
    print("examples", {k: v["ok"] for k, v in report["examples"].items()})
    print("graphs", {k: v["ok"] for k, v in report["graphs"].items()})
    print("GPU CHECK", "PASSED" if report["ok"] else "FAILED")


if __name__ == "__main__":
    main()
