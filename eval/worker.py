"""One rank of a check: `python -m eval.worker SPEC.json RANK`, started by eval.check.

The order of work is what makes the check hard to fool:
1. initialise the process group once;
2. run the reference on every trial's inputs BEFORE the candidate is imported, keep a copy of
   its outputs (and of its inputs after the call, for in-place semantics), then poison the
   buffers it returned so memory a candidate gets uninitialised never holds a valid result;
3. import the candidate once (its builds happen here), count the torch.distributed calls it
   makes, and run it on fresh copies of the same inputs; compare outputs and inputs;
4. time reference and candidate the same way: batches of calls between device-wide
   synchronisations (side-stream work counts), all ranks released together by a barrier,
   inputs rotated over several copies larger than L2;
5. change the inputs in place and check once more, so that a result cached by input address
   is caught.
Progress goes to the parent as JSON lines on the file descriptor PKAGENT_CHECK_FD; the parent
owns every deadline and kills all ranks when one is missed.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import math
import os
import sys
import time
import traceback
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from eval import compare as cmp

COLLECTIVES = (
    "all_reduce", "all_gather", "all_gather_into_tensor", "_all_gather_base", "all_gather_object",
    "reduce_scatter", "reduce_scatter_tensor", "_reduce_scatter_base", "broadcast", "broadcast_object_list",
    "reduce", "scatter", "gather", "all_to_all", "all_to_all_single", "send", "recv", "isend", "irecv",
    "batch_isend_irecv", "barrier",
)


class Channel:
    def __init__(self, fd: int) -> None:
        self.f = os.fdopen(fd, "w", buffering=1)

    def send(self, event: str, **data: Any) -> None:
        self.f.write(json.dumps({"event": event, **data}) + "\n")
        self.f.flush()


class CollectiveCounter:
    """Wraps torch.distributed's collectives; counts calls made while `active`."""

    def __init__(self) -> None:
        self.active = False
        self.counts: dict[str, int] = {}
        self.originals: dict[str, Any] = {}
        c10d = dist.distributed_c10d
        for name in COLLECTIVES:
            fn = getattr(dist, name, None)
            if fn is None:
                continue
            self.originals[name] = fn
            wrapped = self._wrap(name, fn)
            setattr(dist, name, wrapped)
            if hasattr(c10d, name):
                setattr(c10d, name, wrapped)

    def _wrap(self, name: str, fn: Any) -> Any:
        @functools.wraps(fn)
        def counted(*args: Any, **kwargs: Any) -> Any:
            if self.active:
                self.counts[name] = self.counts.get(name, 0) + 1
            return fn(*args, **kwargs)

        return counted

    def __call__(self, fn: Any, *args: Any) -> Any:
        self.active = True
        try:
            return fn(*args)
        finally:
            self.active = False


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()  # device-wide: work on any stream the candidate used


def _seed(base: int, trial: int) -> int:
    return base + 1_000_003 * trial


def _load_candidate(path: str) -> Any:
    spec = importlib.util.spec_from_file_location("candidate", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules["candidate"] = module
    spec.loader.exec_module(module)
    return module


def _classify_build_error(exc: BaseException) -> bool:
    """True for exceptions that mean 'the CUDA/C++ build failed' (nvcc, NVRTC, load_inline)."""
    names = {type(e).__name__ for e in (exc, exc.__cause__, exc.__context__) if e is not None}
    if names & {"BuildError", "CompileException", "NVRTCError"}:
        return True
    text = str(exc)
    return "Error building extension" in text or "nvcc" in text and "error" in text.lower()


def _tail(exc: BaseException, limit: int = 4000) -> str:
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return text[-limit:]


def _copies_for(inputs: Any, device: torch.device) -> int:
    """Enough rotated input copies that together they exceed 3x the L2 cache (2 to 8)."""
    nbytes = sum(t.numel() * t.element_size() for t in cmp.tensors(inputs)) or 1
    l2 = torch.cuda.get_device_properties(device).L2_cache_size if device.type == "cuda" else 32 << 20
    return max(2, min(8, math.ceil(3 * l2 / nbytes)))


def _time(fn: Any, copies: list[Any], device: torch.device, batches: int, calls: int) -> list[float]:
    """Milliseconds per call of each batch. Every batch starts on all ranks together (barrier,
    then a device-wide sync) and ends with a device-wide sync, so work on side streams counts."""
    out = []
    for b in range(batches):
        dist.barrier()
        _sync(device)
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for i in range(calls):
                fn(*copies[(b * calls + i) % len(copies)])
            torch.cuda.synchronize()
            end.record()
            end.synchronize()
            out.append(start.elapsed_time(end) / calls)
        else:
            t0 = time.perf_counter()
            for i in range(calls):
                fn(*copies[(b * calls + i) % len(copies)])
            out.append((time.perf_counter() - t0) * 1e3 / calls)
    return out


def _agree_max(value: float, device: torch.device) -> float:
    t = torch.tensor([value], dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t.item())


def _warmup(fn: Any, copies: list[Any], device: torch.device, min_s: float) -> float:
    """Run fn until at least 3 calls and min_s have passed; the mean seconds per call,
    agreed over ranks (the max), so every rank then makes the same number of calls."""
    n, t0 = 0, time.perf_counter()
    while True:
        fn(*copies[n % len(copies)])
        n += 1
        _sync(device)
        stop = _agree_max(float(n >= 3 and time.perf_counter() - t0 >= min_s or n >= 200), device)
        if stop:
            break
    return _agree_max((time.perf_counter() - t0) / n, device)


def main(spec_path: str, rank: int) -> None:
    spec = json.loads(open(spec_path).read())
    chan = Channel(int(os.environ["PKAGENT_CHECK_FD"]))
    world = spec["world_size"]
    if spec["device"] == "cuda":
        torch.cuda.set_device(rank)
        device = torch.device("cuda", rank)
        backend = "nccl"
    else:
        device = torch.device("cpu")
        backend = "gloo"
    store = dist.TCPStore("127.0.0.1", spec["port"], is_master=False, timeout=timedelta(seconds=60))
    dist.init_process_group(
        backend, store=store, rank=rank, world_size=world,
        **({"device_id": device} if device.type == "cuda" else {}),
    )
    chan.send("started")

    from eval.suites import load

    problem = load(spec["problem"])
    tolerances = problem.tolerances
    strict = problem.meta.strict_dtype
    trials, size, base_seed = spec["trials"], spec["size"], spec["seed"]

    # 2. references first, before any candidate code exists in this process.
    refs = []
    for t in range(trials):
        inputs = problem.make_inputs(rank, world, _seed(base_seed, t), device, size)
        ref_in = cmp.clone(inputs)
        out = problem.reference(*ref_in)
        _sync(device)
        refs.append((cmp.clone(out), cmp.clone(ref_in)))
        cmp.poison(out)
        del inputs, ref_in, out
    _sync(device)
    chan.send("references")

    # 3. the candidate, imported once.
    counter = CollectiveCounter()
    def watched() -> dict[str, Any]:
        """What the verdict and the timing rest on; a candidate must not replace any of it."""
        here = globals()
        return {"eval.compare.compare": cmp.compare, "reference": problem.reference, "make_inputs": problem.make_inputs,
                "torch.cuda.synchronize": torch.cuda.synchronize, "torch.cuda.Event": torch.cuda.Event,
                "time.perf_counter": time.perf_counter, "the checker's timer": here["_time"], "the checker's warm-up": here["_warmup"]}

    guarded = watched()

    def tampered() -> str | None:
        now = watched()
        changed = [k for k in guarded if now[k] is not guarded[k]]
        return f"the candidate replaced {', '.join(changed)}" if changed else None

    try:
        module = counter(_load_candidate, spec["candidate"])
        solution = getattr(module, "solution", None)
        if not callable(solution):
            chan.send("error", status="import_error", message="the candidate defines no function solution(*inputs)")
            return
    except BaseException as e:  # noqa: BLE001 - anything the candidate raises at import
        status = "compile_error" if _classify_build_error(e) else "import_error"
        chan.send("error", status=status, message=f"{type(e).__name__}: {str(e)[:2000]}", tail=_tail(e))
        return
    chan.send("ready")

    all_ok = True
    for t in range(trials):
        inputs = problem.make_inputs(rank, world, _seed(base_seed, t), device, size)
        try:
            out = counter(solution, *inputs)
            _sync(device)
        except BaseException as e:  # noqa: BLE001
            status = "compile_error" if _classify_build_error(e) else "runtime_error"
            chan.send("error", status=status, trial=t, message=f"{type(e).__name__}: {str(e)[:2000]}", tail=_tail(e))
            return
        want_out, want_in = refs[t]
        detail = cmp.compare(out, want_out, tolerances, strict)
        if detail is None:
            detail = cmp.compare(inputs, want_in, tolerances, strict, path="inputs")
            if detail:
                detail["message"] = "the candidate changed its inputs: " + detail["message"]
        cheat = tampered()
        if cheat:
            chan.send("trial", trial=t, ok=False, cheating=True, message=cheat)
            return
        chan.send("trial", trial=t, ok=detail is None, **(detail or {}))
        all_ok &= detail is None
        del out, inputs
    chan.send("collectives", counts=counter.counts)

    everyone_ok = _agree_max(0.0 if all_ok else 1.0, device) == 0.0
    if spec["perf"] and everyone_ok:
        copies = [problem.make_inputs(rank, world, _seed(base_seed, 100), device, size)]
        copies += [problem.make_inputs(rank, world, _seed(base_seed, 100 + i), device, size)
                   for i in range(1, _copies_for(copies[0], device))]
        ref_copies = [cmp.clone(c) for c in copies]
        timings = {}
        for name, fn, data in (("reference", problem.reference, ref_copies), ("candidate", solution, copies)):
            per_call = _warmup(fn, data, device, spec["warmup_s"])
            calls = max(1, min(1000, int(spec["batch_s"] / max(per_call, 1e-7))))
            timings[name] = {"ms": _time(fn, data, device, spec["batches"], calls), "calls": calls}
            chan.send("timed", which=name, **timings[name])
        cheat = tampered()
        if cheat:
            chan.send("trial", trial=trials - 1, ok=False, cheating=True, message=cheat)
            return
        # 5. same addresses, new values: a result cached by input address is now stale.
        # (Problems whose shapes depend on the seed are skipped on every rank alike.)
        fresh = problem.make_inputs(rank, world, _seed(base_seed, 999), device, size)
        pairs = list(zip(cmp.tensors(copies[0]), cmp.tensors(fresh)))
        same = float(all(a.shape == b.shape and a.dtype == b.dtype for a, b in pairs))
        if _agree_max(1.0 - same, device) == 0.0:
            with torch.no_grad():
                for dst, src in pairs:
                    dst.copy_(src)
            want = problem.reference(*cmp.clone(copies[0]))
            got = solution(*copies[0])
            _sync(device)
            detail = cmp.compare(got, want, tolerances, strict)
            chan.send("fresh", ok=detail is None, **(detail or {}))
    chan.send("done")
    dist.destroy_process_group()


if __name__ == "__main__":
    try:
        main(sys.argv[1], int(sys.argv[2]))
    except SystemExit:
        raise
    except BaseException as e:  # noqa: BLE001 - report, then die: the parent kills the rest
        try:
            Channel(int(os.environ["PKAGENT_CHECK_FD"])).send("error", status="runtime_error", message=f"{type(e).__name__}: {str(e)[:2000]}", tail=_tail(e))
        finally:
            os._exit(3)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
