"""The candidate's process for one rank: `python -m eval.runner SPEC RANK`, started by
eval/launch.py.

Untrusted by design: it imports the candidate, so the candidate's code can replace anything in
this process, this file included. Nothing it reports is believed without a check on the judge's
side (eval/judge.py); what it offers is the service an honest candidate needs:

- a process group among the runners (a FileStore in the scratch directory: no network needed);
- `call`: build one call's inputs with the problem's own make_inputs from the judge's seed, run
  the candidate `repeats` times on identical inputs (restored in place between repeats), send
  the first output back as bytes with digests of the inputs before and after the call (the
  inputs themselves where the judge asks), and say whether the repeats disagreed (a race);
- `prepare` / `go` / `output`: a timed batch of calls over fresh input copies, then the output
  of one call the judge picks after the batch is over;
- `capture`: the batch's calls captured once as a CUDA graph over input copies that `prepare`
  then refills in place, so that `go` replays it (for calls bound by the host: no Python runs
  while the graph is timed);
- `touch`: one GPU operation here before a reference batch (each side's batch then starts with
  the same switch between the two processes' GPU contexts).
"""

from __future__ import annotations

import importlib.util
import os
import socket
import sys
import time
import traceback
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from eval import compare as cmp
from eval import wire
from eval.launch import die_with_parent

# ProcessGroup methods: what dist.* and group objects (group.WORLD.allreduce) all go through.
PG_METHODS = {
    "allreduce": "all_reduce",
    "allreduce_coalesced": "all_reduce",
    "allgather": "all_gather",
    "_allgather_base": "all_gather_into_tensor",
    "allgather_into_tensor_coalesced": "all_gather_into_tensor",
    "all_gather_single": "all_gather_into_tensor",
    "reduce_scatter": "reduce_scatter",
    "_reduce_scatter_base": "reduce_scatter_tensor",
    "reduce_scatter_tensor_coalesced": "reduce_scatter_tensor",
    "reduce_scatter_single": "reduce_scatter_tensor",
    "alltoall": "all_to_all",
    "alltoall_base": "all_to_all_single",
    "all_to_all_single": "all_to_all_single",
    "broadcast": "broadcast",
    "reduce": "reduce",
    "gather": "gather",
    "scatter": "scatter",
    "send": "send",
    "recv": "recv",
    "recv_anysource": "recv",
    "barrier": "barrier",
}


class CollectiveCounter:
    """Counts the process-group operations made while `active`, at the ProcessGroup layer."""

    def __init__(self) -> None:
        self.active = False
        self.counts: dict[str, int] = {}
        pg = dist.ProcessGroup
        for method, name in PG_METHODS.items():
            fn = getattr(pg, method, None)
            if fn is not None:
                setattr(pg, method, self._wrap(name, fn))

    def _wrap(self, name: str, fn: Any) -> Any:
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


def build_error(exc: BaseException) -> bool:
    """True for exceptions that mean 'the CUDA/C++ build failed' (nvcc, NVRTC, load_inline)."""
    names = {type(e).__name__ for e in (exc, exc.__cause__, exc.__context__) if e is not None}
    if names & {"BuildError", "CompileException", "NVRTCError"}:
        return True
    text = str(exc)
    return "Error building extension" in text or "nvcc" in text and "error" in text.lower()


def tail(exc: BaseException, limit: int = 4000) -> str:
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-limit:]


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()  # device-wide: work on any stream the candidate used


def restore(dst: Any, src: Any) -> None:
    """Copy src's tensor values into dst's tensors, in place (same addresses)."""
    with torch.no_grad():
        for d, s in zip(cmp.tensors(dst), cmp.tensors(src)):
            d.copy_(s)


def tweak(inputs: Any, draw: list[float]) -> None:
    """x[p] = x[q] on the first tensor of `inputs` with more than one element (eval.judge.tweak)."""
    x = next((y for y in cmp.tensors(inputs) if y.numel() > 1), None)
    if x is not None:
        a, b = draw
        with torch.no_grad():
            x.view(-1)[int(a * x.numel())] = x.view(-1)[int(b * x.numel())]


def capture_calls(fn: Any, copies: list, calls: int, device: torch.device) -> tuple[Any, list]:
    """`calls` calls of fn (call i on copies[i % k]) captured as one CUDA graph: (graph, outputs).
    One call first on a side stream, so that lazy set-up (handles, workspaces) is not captured."""
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):
        fn(*copies[0])
    torch.cuda.current_stream(device).wait_stream(side)
    sync(device)
    graph = torch.cuda.CUDAGraph()
    # thread_local: the process group's watchdog thread may query events while this thread captures
    with torch.cuda.graph(graph, capture_error_mode="thread_local"):
        outs = [fn(*copies[i % len(copies)]) for i in range(calls)]
    sync(device)
    return graph, outs


def storages(obj: Any) -> set[int]:
    return {t.untyped_storage().data_ptr() for t in cmp.tensors(obj) if t.numel()}


class Runner:
    def __init__(self, spec: dict, rank: int, sock: socket.socket) -> None:
        self.spec, self.rank, self.sock = spec, rank, sock
        self.world = spec["world_size"]
        if spec["device"] == "cuda":
            torch.cuda.set_device(rank)
            self.device = torch.device("cuda", rank)
        else:
            self.device = torch.device("cpu")
        store = dist.FileStore(spec["store"], self.world)
        # No collective timeout of our own here: the parent's no-progress deadline decides (a deadlock is a `timeout`).
        dist.init_process_group(
            "nccl" if self.device.type == "cuda" else "gloo",
            store=store,
            rank=rank,
            world_size=self.world,
            timeout=timedelta(seconds=max(1800, 10 * spec["timeout"])),
            **({"device_id": self.device} if self.device.type == "cuda" else {}),
        )
        from eval.suites import load

        self.problem = load(spec["problem"])
        self.counter = CollectiveCounter()
        self.solution = None
        self.last: Any = None  # the inputs of the last `call`, for a re-call on the same tensors
        self.copies: list[Any] = []
        self.outs: list[Any] = []
        self.graph: Any = None  # the captured batch (capture), and its outputs
        self.graph_outs: list[Any] = []

    def send(self, header: dict, tensors: list[torch.Tensor] = ()) -> None:
        wire.send(self.sock, header, list(tensors))

    def inputs(self, seed: int) -> Any:
        return self.problem.make_inputs(self.rank, self.world, seed, self.device, self.spec["size"])

    def load(self) -> bool:
        spec = importlib.util.spec_from_file_location("candidate", self.spec["candidate"])
        try:
            module = importlib.util.module_from_spec(spec)
            sys.modules["candidate"] = module
            self.counter(spec.loader.exec_module, module)
        except BaseException as e:  # noqa: BLE001 - anything the candidate raises at import
            self.send(
                {
                    "op": "error",
                    "status": "compile_error" if build_error(e) else "import_error",
                    "message": f"{type(e).__name__}: {str(e)[:2000]}",
                    "tail": tail(e),
                }
            )
            return False
        self.solution = getattr(module, "solution", None)
        if not callable(self.solution):
            self.send({"op": "error", "status": "import_error", "message": "the candidate defines no function solution(*inputs)"})
            return False
        self.send({"op": "ready"})
        return True

    def call(self, head: dict) -> None:
        if head.get("reuse") and self.last is not None:
            inputs, pristine = self.last
            restore(inputs, pristine)
        else:
            inputs = self.inputs(head["seed"])
        leaves = cmp.tensors(inputs)
        with torch.no_grad():
            for leaf, pos, value in head.get("tweak", []):
                leaves[leaf].view(-1)[pos] = value
        pristine = cmp.clone(inputs)
        self.last = (inputs, pristine)
        digest = [cmp.digest(t) for t in leaves]
        self.counter.counts = {}
        first = after = None
        differs = ""
        for r in range(max(1, head.get("repeats", 1))):
            if r:
                restore(inputs, pristine)
            out = (self.counter if r == 0 else (lambda f, *a: f(*a)))(self.solution, *inputs)
            wire.flatten(out, [])  # plain data only: a lazy tensor subclass is refused before anything reads it
            sync(self.device)
            if r == 0:
                first, after = cmp.clone(out), cmp.clone(inputs)
                counts = dict(self.counter.counts)
            else:
                d = cmp.compare(out, first, self.problem.tolerances, self.problem.meta.strict_dtype)
                if d and not differs:
                    differs = f"repeat {r + 1} of {head['repeats']} on identical inputs: {d['message']}"
        # The inputs after the call travel whole only where the judge asks (the reference itself
        # changes them); elsewhere their digests show whether the candidate changed them.
        tensors: list[torch.Tensor] = []
        out = wire.flatten(first, tensors)
        after_tree = wire.flatten(cmp.tensors(after), tensors) if head.get("send_inputs") else None
        self.send(
            {
                "op": "result",
                "out": out,
                "inputs": after_tree,
                "digest": digest,
                "digest_after": [cmp.digest(t) for t in cmp.tensors(after)],
                "differs": differs,
                "counts": counts,
            },
            tensors,
        )

    def prepare(self, head: dict) -> None:
        fresh = [self.inputs(s) for s in head["seeds"]]
        if head.get("graph"):  # the captured copies keep their addresses: refill them
            for c, f in zip(self.copies, fresh):
                restore(c, f)
        else:
            self.copies, self.graph, self.graph_outs = fresh, None, []
        self.outs = []
        sync(self.device)
        self.send({"op": "prepared"})

    def capture(self, head: dict) -> None:
        """Capture the batch as a CUDA graph over copies built from the judge's seeds; say why not
        where the candidate cannot be captured (the check then times calls one by one)."""
        self.copies = [self.inputs(s) for s in head["seeds"]]
        self.graph, self.graph_outs, why = None, [], ""
        try:
            self.graph, self.graph_outs = capture_calls(self.solution, self.copies, head["calls"], self.device)
        except Exception as e:  # noqa: BLE001 - an honest candidate may simply not be capturable
            root = e.__context__ or e  # the error inside the capture, not the one ending it
            why = f"{type(root).__name__}: {str(root).strip()[:300]}"
        self.send({"op": "captured", "why": why})

    def go(self, head: dict) -> None:
        """The timed loop: each copy changed at the judge's positions, then as little as possible
        between the calls (the judge's reference loop is the same), then a device-wide sync so
        work on any stream counts."""
        fn, copies, k, outs = self.solution, self.copies, len(self.copies), []
        graph = self.graph if head.get("graph") else None
        t0 = time.perf_counter()
        for c, draw in zip(copies, head["draws"]):
            tweak(c, draw)
        if graph is not None:
            for _ in range(max(1, int(head.get("replays", 1)))):
                graph.replay()
            outs = self.graph_outs
        else:
            for i in range(head["calls"]):
                outs.append(fn(*copies[i % k]))
        t1 = time.perf_counter()
        sync(self.device)
        t2 = time.perf_counter()
        self.outs = outs
        self.send({"op": "done", "enqueue_s": t1 - t0, "loop_s": t2 - t0})

    def touch(self, head: dict) -> None:
        """A GPU operation in this process, so that its context is the last one the GPU ran."""
        if self.device.type == "cuda":
            torch.ones(1, device=self.device).add_(1)
            sync(self.device)
        self.send({"op": "touched"})

    def aliases(self, head: dict) -> None:
        """The calls of the last batch whose output no later call overwrote: neither a buffer
        returned again later, nor an input it aliases that a later call on the same copy changed."""
        k, outs = len(self.copies), self.outs
        own = [storages(o) for o in outs]
        ins = [storages(c) for c in self.copies]
        later: set[int] = set()
        ok = []
        for j in range(len(outs) - 1, -1, -1):
            if not own[j] & later and not (own[j] & ins[j % k] and j + k < len(outs)):
                ok.append(j)
            later |= own[j]
        self.send({"op": "aliases", "verifiable": ok[::-1]})

    def output(self, head: dict) -> None:
        """Call j's output: its tensors' shapes, and their elements at the judge's draw."""
        j, tensors, tree, layout = head["call"], [], None, None
        if 0 <= j < len(self.outs):
            wire.flatten(self.outs[j], [])  # plain data only
            layout = cmp.shapes(self.outs[j])
            tree = wire.flatten(cmp.sample(self.outs[j], head["sample_seed"]), tensors)
        self.outs = []
        self.send({"op": "output", "out": tree, "shapes": layout}, tensors)

    def serve(self) -> None:
        handlers = {
            "call": self.call,
            "prepare": self.prepare,
            "go": self.go,
            "capture": self.capture,
            "aliases": self.aliases,
            "output": self.output,
            "touch": self.touch,
        }
        while True:
            head, _ = wire.recv(self.sock)
            if head["op"] == "exit":
                return
            if head.get("cpus"):
                os.sched_setaffinity(0, head["cpus"])
            try:
                handlers[head["op"]](head)
            except wire.BadOutput as e:
                self.send({"op": "error", "status": "bad_output", "message": f"the candidate returned {e}"})
                return
            except BaseException as e:  # noqa: BLE001
                self.send(
                    {
                        "op": "error",
                        "status": "compile_error" if build_error(e) else "runtime_error",
                        "message": f"{type(e).__name__}: {str(e)[:2000]}",
                        "tail": tail(e),
                    }
                )
                return


def run_rank(spec_path: str, rank: int) -> None:
    import json

    die_with_parent()
    spec = json.loads(open(spec_path).read())
    sock = socket.socket(fileno=int(os.environ["PKAGENT_RUNNER_FD"]))
    try:
        runner = Runner(spec, rank, sock)
        if runner.load():
            runner.serve()
    except BaseException as e:  # noqa: BLE001 - say what happened, then die
        try:
            wire.send(
                sock,
                {"op": "error", "status": "runtime_error", "message": f"{type(e).__name__}: {str(e)[:2000]}", "tail": tail(e)},
            )
        finally:
            os._exit(3)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    run_rank(sys.argv[1], int(sys.argv[2]))
