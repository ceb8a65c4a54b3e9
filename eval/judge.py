"""The trusted side of one rank: `python -m eval.judge SPEC RANK`, started by eval.check.

A judge never imports candidate code. It joins the judges' process group, computes every
reference, drives its rank's runner (eval/runner.py, the candidate's process) over a socket,
compares what comes back, times both sides with its own clock and reports progress to the
parent as JSON lines on PKAGENT_CHECK_FD. In order:

1. references for every trial, on inputs from the problem's make_inputs and the trial's seed;
2. each trial: the runner builds the same inputs from the seed (their digests must agree), calls
   the candidate `repeats` times on identical inputs and sends back the first output (compared
   here) and the inputs after the call (whole where the reference changes its inputs, else as
   digests that must not have moved); repeats that disagree are a race, reported as `incorrect`;
3. one more call on the last trial's tensors, restored in place with one element changed: a
   result cached by address (or by a few sampled values) is stale there;
4. with perf: reference and candidate batches interleaved (AB, BA, ...), each batch on fresh
   inputs that both sides change at a secret position only once its clock runs, every batch
   timed here (the reference's batch pays a socket round trip like the candidate's, to a thread
   of the judge, so the candidate cannot answer it late); after
   each candidate batch the output of one call drawn at random is checked against the reference;
   pairs continue until the bootstrap interval of the speedup is narrow enough or the time
   budget ends. Where calls are bound by the host (or `graphs` is "on"), both sides' batches are
   first captured as CUDA graphs and the pairs time their replays.
"""

from __future__ import annotations

import ctypes
import json
import math
import os
import random
import socket
import sys
import threading
import time
import traceback
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from eval import compare as cmp
from eval import wire
from eval.launch import die_with_parent
from eval.runner import capture_calls, restore, sync, tweak

GRAPH_HOST_FRACTION = 0.5  # graphs="auto" captures where a side spends more of its batch issuing calls


class Failed(Exception):
    """The rank's verdict is already sent; stop here."""


class Channel:
    def __init__(self, fd: int) -> None:
        self.f = os.fdopen(fd, "w", buffering=1)

    def send(self, event: str, **data: Any) -> None:
        self.f.write(json.dumps({"event": event, **data}) + "\n")
        self.f.flush()


class Echo:
    """A message to a thread of this process and its answer, through the same protocol as the
    runner's: the round trip a candidate batch pays, for the reference's batch to pay too,
    without letting the candidate's process (which could answer late) into the reference's clock."""

    def __init__(self) -> None:
        self.sock, theirs = socket.socketpair()

        def serve() -> None:
            while True:
                head, _ = wire.recv(theirs)
                wire.send(theirs, {"op": "pong", "seen": head.get("op")})

        threading.Thread(target=serve, daemon=True).start()

    def __call__(self) -> None:
        wire.send(self.sock, {"op": "ping"})
        wire.recv(self.sock)


def undumpable() -> None:
    """No ptrace or /proc/PID/mem reads of this process by same-user processes (Linux)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(4, 0)  # PR_SET_DUMPABLE 0
    except (OSError, AttributeError):
        pass


def local_cpus(rank: int) -> list[int] | None:
    """The CPUs near GPU `rank` (its PCI device's local_cpulist), shared out among the ranks
    whose GPUs are near the same CPUs; None where the topology cannot be read."""

    def near(i: int) -> list[int] | None:
        props = torch.cuda.get_device_properties(i)
        bus = f"{getattr(props, 'pci_domain_id', 0):04x}:{getattr(props, 'pci_bus_id', -1):02x}:{getattr(props, 'pci_device_id', 0):02x}.0"
        try:
            text = open(f"/sys/bus/pci/devices/{bus}/local_cpulist").read().strip()
        except OSError:
            return None
        cpus = []
        for part in text.split(","):
            lo, _, hi = part.partition("-")
            cpus += range(int(lo), int(hi or lo) + 1)
        return [c for c in cpus if c in os.sched_getaffinity(0)] or None

    mine = near(rank)
    if not mine:
        return None
    sharing = [i for i in range(torch.cuda.device_count()) if near(i) == mine]
    share = len(mine) // len(sharing)
    pos = sharing.index(rank)
    return mine[pos * share : (pos + 1) * share] if share >= 2 else mine


def bootstrap_ci(ratios: list[float], seed: int, resamples: int = 2000, level: float = 0.95) -> tuple[float, float, float]:
    """The median of per-pair speedups and its percentile-bootstrap interval."""
    r = torch.tensor(ratios, dtype=torch.float64)
    g = torch.Generator().manual_seed(seed)
    idx = torch.randint(len(ratios), (resamples, len(ratios)), generator=g)
    meds = r[idx].median(dim=1).values
    lo, hi = torch.quantile(meds, torch.tensor([(1 - level) / 2, (1 + level) / 2], dtype=torch.float64)).tolist()
    return float(r.median()), lo, hi


class Judge:
    def __init__(self, spec: dict, rank: int, chan: Channel, sock: socket.socket) -> None:
        self.spec, self.rank, self.chan, self.sock = spec, rank, chan, sock
        self.world = spec["world_size"]
        if spec["device"] == "cuda":
            torch.cuda.set_device(rank)
            self.device = torch.device("cuda", rank)
            cpus = local_cpus(rank)
            pin = os.environ.get("PKAGENT_PIN", "split")
            self.cpus = None
            if cpus and pin != "none":
                half = len(cpus) // 2 if pin == "split" and len(cpus) >= 4 else 0
                mine, theirs = (cpus[:half], cpus[half:]) if half else (cpus, cpus)
                os.sched_setaffinity(0, mine)
                self.cpus = theirs  # the runner's
        else:
            self.device = torch.device("cpu")
            self.cpus = None
        store = dist.TCPStore("127.0.0.1", spec["port"], is_master=False, timeout=timedelta(seconds=60))
        dist.init_process_group(
            "nccl" if self.device.type == "cuda" else "gloo",
            store=store,
            rank=rank,
            world_size=self.world,
            **({"device_id": self.device} if self.device.type == "cuda" else {}),
        )
        from eval.suites import load

        self.problem = load(spec["problem"])
        self.tol, self.strict = self.problem.tolerances, self.problem.meta.strict_dtype
        self.rng = random.Random(spec["secret"])  # the same draws on every judge; the runners never see it
        self.budget, self.out_bytes = 0, 0  # bytes a message from the runner may carry, set from the references
        self.echo = Echo()
        self.graph: Any = None  # the reference's captured batch, when both sides time graphs
        self.replays = 1  # replays of the captured batch per timed batch
        self.soft_failure = ""
        self.graph_copies: list[Any] = []
        self.graph_layout = ""  # cmp.layout of the captured copies

    # --- plumbing ---------------------------------------------------------------------------
    def inputs(self, seed: int) -> Any:
        return self.problem.make_inputs(self.rank, self.world, seed, self.device, self.spec["size"])

    def agree_max(self, *values: float) -> list[float]:
        t = torch.tensor(values, dtype=torch.float64, device=self.device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return t.tolist()

    def fail(self, status: str, message: str, **extra: Any) -> None:
        if status in ("incorrect", "cheating_detected"):
            self.chan.send("trial", ok=False, cheating=status == "cheating_detected", message=message, **extra)
        else:
            self.chan.send("error", status=status, message=message, **extra)
        raise Failed

    def ask(self, header: dict | None, expect: str, max_bytes: float = 0) -> tuple[dict, Any]:
        """Send a command to the runner (None: just listen) and read its answer; a runner that
        fails, breaks the protocol or goes away ends the check for this rank with the reason."""
        try:
            if header is not None:
                wire.send(self.sock, header)
            head, tensors = wire.recv(self.sock, max_bytes)
        except EOFError:
            self.fail("runtime_error", "the candidate's process ended without answering (it exited or was killed; see its log)")
        except (wire.WireError, OSError) as e:
            self.fail("cheating_detected", f"the candidate's process broke the checker's protocol: {e}")
        op = head.get("op")
        if op == "error":
            status = head.get("status")
            if status == "bad_output":
                sub = "subclass" in str(head.get("message"))
                self.fail("cheating_detected" if sub else "incorrect", str(head.get("message"))[:2000])
            status = status if status in ("compile_error", "import_error", "runtime_error") else "runtime_error"
            self.fail(status, str(head.get("message"))[:2000], tail=str(head.get("tail", ""))[-4000:])
        if op != expect:
            self.fail(
                "cheating_detected", f"the candidate's process answered {str(op)[:50]!r} where the protocol expects {expect!r}"
            )
        return head, tensors

    def tree(self, head: dict, key: str, tensors: list[torch.Tensor]) -> Any:
        try:
            return wire.unflatten(head[key], [t.to(self.device) for t in tensors])
        except (wire.WireError, KeyError, TypeError, ValueError) as e:
            self.fail("cheating_detected", f"the candidate's process sent a malformed output ({e})")

    def check(self, got: Any, want: Any, what: str, path: str = "") -> None:
        d = cmp.compare(got, want, self.tol, self.strict, path)
        if d:
            self.fail("incorrect", f"{what}: {d['message']}", **{k: v for k, v in d.items() if k != "message"})

    # --- the check ----------------------------------------------------------------------------
    def run(self) -> None:
        spec, trials = self.spec, self.spec["trials"]
        seeds = [spec["seed"] + 1_000_003 * t for t in range(trials)]
        refs = []
        for t, seed in enumerate(seeds):
            inputs = self.inputs(seed)
            digest = [cmp.digest(x) for x in cmp.tensors(inputs)]
            ref_in = cmp.clone(inputs)
            out = self.problem.reference(*ref_in)
            sync(self.device)
            if t == 0:
                self.mutating = cmp.compare(ref_in, inputs, self.tol, self.strict) is not None
            # what a message may carry: outputs and inputs, with room for shapes that vary with the seed
            out_bytes = sum(x.numel() * x.element_size() for x in cmp.tensors(out))
            self.out_bytes = max(self.out_bytes, out_bytes, 1)
            self.budget = max(
                self.budget, 4 * (out_bytes + sum(x.numel() * x.element_size() for x in cmp.tensors(inputs))) + (1 << 20)
            )
            refs.append((cmp.clone(out), cmp.clone(ref_in), digest))
            del inputs, ref_in, out
        self.chan.send("references")

        self.ask(None, "ready", 0)  # the runner says so once the candidate is imported
        self.chan.send("ready", cpus=self.cpus)
        counts: dict[str, int] = {}
        for t, seed in enumerate(seeds):
            head, tensors = self.ask(
                {"op": "call", "seed": seed, "repeats": spec["repeats"], "cpus": self.cpus, "send_inputs": self.mutating},
                "result",
                self.budget,
            )
            want_out, want_in, digest = refs[t]
            self.same_inputs(head.get("digest"), digest, f"trial {t}")
            self.check(self.tree(head, "out", tensors), want_out, f"trial {t}")
            if self.mutating:  # the reference changes its inputs: the candidate's must change alike
                self.check(
                    self.tree(head, "inputs", tensors),
                    cmp.tensors(want_in),
                    f"trial {t}: the candidate changed its inputs",
                    "inputs",
                )
            elif head.get("digest_after") != digest:  # they must be exactly as they were
                self.same_inputs(
                    head.get("digest_after"), digest, f"trial {t}", "the candidate changed its inputs (the reference does not)"
                )
            if head.get("differs"):
                self.fail("incorrect", f"trial {t}: nondeterministic output (a race?): {str(head['differs'])[:1500]}")
            for k, v in (head.get("counts") or {}).items():
                counts[str(k)[:50]] = counts.get(str(k)[:50], 0) + int(v)
            self.chan.send("trial", trial=t, ok=True)
        self.stale_check(seeds[-1])
        self.chan.send("collectives", counts=counts)
        if spec["perf"]:
            self.time()
        self.chan.send("done")

    def same_inputs(self, got: Any, want: list, where: str, why: str = "") -> None:
        def close(g: Any, w: list) -> bool:
            return (
                isinstance(g, list)
                and len(g) == 2
                and all(isinstance(a, (int, float)) and abs(float(a) - b) <= 1e-9 * max(1.0, abs(b)) for a, b in zip(g, w))
            )

        bad = [i for i, w in enumerate(want) if not (isinstance(got, list) and i < len(got) and close(got[i], w))]
        if bad or not isinstance(got, list) or len(got) != len(want):
            self.fail(
                "incorrect",
                f"{where}: "
                + (
                    f"{why}: input tensor {bad[0] if bad else 0} differs"
                    if why
                    else "the inputs the candidate's process built from the seed differ from the judge's "
                    "(its code changed torch's random number generation or the problem's input maker)"
                ),
            )

    def stale_check(self, seed: int) -> None:
        inputs = self.inputs(seed)
        floats = [x for x in cmp.tensors(inputs) if x.is_floating_point() and x.numel() > 1 and not x.requires_grad]
        if not floats:
            return
        x = floats[0]
        leaf = next(n for n, y in enumerate(cmp.tensors(inputs)) if y is x)
        pos = int(self.rng.random() * x.numel())
        with torch.no_grad():
            x.view(-1)[pos] = x.view(-1)[pos] * -2 + 1
        value = x.view(-1)[pos].item()
        want = self.problem.reference(*cmp.clone(inputs))
        sync(self.device)
        head, tensors = self.ask(
            {"op": "call", "reuse": True, "repeats": 1, "tweak": [[leaf, pos, value]]}, "result", self.budget
        )
        got = self.tree(head, "out", tensors)
        d = cmp.compare(got, want, self.tol, self.strict)
        if d:
            self.fail(
                "cheating_detected",
                "stale result after one input element changed in place (a result cached by "
                f"address or by sampled values): {d['message']}",
            )

    # --- timing -------------------------------------------------------------------------------
    def batch_plan(self) -> tuple[list[int], list[tuple[float, float]]]:
        """A batch's seeds and secret positions. With graphs, only seeds whose inputs have the
        captured layout (shapes, dtypes, other arguments), agreed by every rank."""
        seeds, tries = [], 0
        while len(seeds) < self.copies:
            seed = self.rng.randrange(1 << 40)
            if self.graph is None or not self.agree_max(float(cmp.layout(self.inputs(seed)) != self.graph_layout))[0]:
                seeds.append(seed)
            tries += 1
            if tries > 50 * self.copies:
                raise RuntimeError("no seed gives inputs of the captured layout in 50 tries a copy")
        return seeds, [(self.rng.random(), self.rng.random()) for _ in range(self.copies)]

    def ref_batch(self, calls: int) -> tuple[float, float]:
        seeds, draws = self.batch_plan()
        copies = [self.inputs(s) for s in seeds]
        graph = self.graph
        if graph is not None:  # refill the captured copies in place
            for c, f in zip(self.graph_copies, copies):
                restore(c, f)
            copies = self.graph_copies
        sync(self.device)
        k, fn, outs = len(copies), self.problem.reference, []
        dist.barrier()
        sync(self.device)
        # The runner's GPU context ran last, as the judge's did before a candidate batch: both
        # sides' batches start with the same switch between the two processes' contexts.
        self.ask({"op": "touch"}, "touched", 0)
        t0 = time.perf_counter()
        for c, draw in zip(copies, draws):
            tweak(c, draw)
        if graph is not None:
            for _ in range(self.replays):
                graph.replay()
        else:
            for i in range(calls):
                outs.append(fn(*copies[i % k]))
        t1 = time.perf_counter()
        sync(self.device)
        self.echo()  # the round trip a candidate batch pays, answered here, not by the runner
        t2 = time.perf_counter()
        return (t2 - t0) / (calls * self.replays), (t1 - t0) / (t2 - t0)

    def cand_batch(self, calls: int) -> tuple[float, float, tuple[list[int], list]]:
        seeds, draws = self.batch_plan()
        graph = self.graph is not None
        self.ask({"op": "prepare", "seeds": seeds, "graph": graph}, "prepared", 0)
        dist.barrier()
        sync(self.device)
        t0 = time.perf_counter()
        head, _ = self.ask({"op": "go", "calls": calls, "draws": draws, "graph": graph, "replays": self.replays}, "done", 0)
        wall = time.perf_counter() - t0
        loop_s, enq_s = head.get("loop_s"), head.get("enqueue_s")
        if not (
            isinstance(loop_s, (int, float)) and isinstance(enq_s, (int, float)) and 0 <= enq_s <= loop_s <= wall * 1.01 + 1e-3
        ):
            shown = f"{loop_s * 1e3:.3f} ms" if isinstance(loop_s, (int, float)) else repr(loop_s)[:50]
            self.fail(
                "cheating_detected",
                f"the candidate's process reported a timed loop of {shown} where the "
                f"judge's clock saw {wall * 1e3:.3f} ms (a forged or tampered clock)",
            )
        return wall / (calls * self.replays), (enq_s / loop_s if loop_s > 0 else 0.0), (seeds, draws)

    def verify(self, calls: int, plan: tuple[list[int], list], batch: int, soft: bool = False) -> bool:
        """Check the output of one call of the last candidate batch, drawn after the batch.
        soft: a wrong output returns False instead of failing the check (a first graph replay)."""
        head, _ = self.ask({"op": "aliases"}, "aliases", 0)
        mask = torch.zeros(calls, dtype=torch.float64, device=self.device)
        ok = [int(j) for j in head.get("verifiable", []) if isinstance(j, int) and 0 <= j < calls]
        mask[ok] = 1.0
        dist.all_reduce(mask, op=dist.ReduceOp.MIN)
        common = mask.nonzero().reshape(-1).tolist()
        u = self.rng.random()
        if not common:
            self.ask({"op": "output", "call": -1}, "output", 0)
            return False
        j = common[min(len(common) - 1, int(u * len(common)))]
        draw = self.rng.randrange(1 << 40)
        head, tensors = self.ask({"op": "output", "call": j, "sample_seed": draw}, "output", 4 * self.out_bytes + (1 << 20))
        got = self.tree(head, "out", tensors)
        seeds, draws = plan
        k = len(seeds)
        inputs = self.inputs(seeds[j % k])
        tweak(inputs, draws[j % k])
        reps = j // k + 1 if self.mutating else 1
        for _ in range(reps):
            want = self.problem.reference(*inputs)
        sync(self.device)
        where = f"timed batch {batch}" if batch >= 0 else "a warm-up batch"
        layout = (lambda ss: ss) if self.strict else (lambda ss: [s[0] for s in ss or []])  # dtype too where strict
        if layout(head.get("shapes")) != layout(cmp.shapes(want)):
            if soft:
                self.soft_failure = f"output shapes {str(head.get('shapes'))[:200]}"
                return False
            self.fail(
                "incorrect",
                f"{where}, call {j + 1} of {calls}: output shapes {str(head.get('shapes'))[:300]}, expected {cmp.shapes(want)}",
            )
        d = cmp.compare(got, cmp.sample(want, draw), self.tol, self.strict)
        if d and soft:
            self.soft_failure = d["message"]
            return False
        if d:
            self.fail(
                "incorrect",
                f"{where}, call {j + 1} of {calls} (drawn after the batch), at sampled positions: {d['message']} "
                "(wrong only when called back to back: a race, or work skipped while timed)",
            )
        return True

    def capture(self, calls: int) -> str:
        """Both sides' batches captured as CUDA graphs on every rank: '' if so, else why not (then
        neither side uses one)."""
        seeds = [self.rng.randrange(1 << 40) for _ in range(self.copies)]
        self.graph_copies = [self.inputs(s) for s in seeds]
        self.graph_layout = cmp.layout(self.graph_copies[0])
        if self.agree_max(float(any(cmp.layout(c) != self.graph_layout for c in self.graph_copies)))[0]:
            self.graph_copies = []
            return "the problem's input shapes or arguments change with the seed (a graph would fix them)"
        why = ""
        try:
            self.graph, _ = capture_calls(self.problem.reference, self.graph_copies, calls, self.device)
        except Exception as e:  # noqa: BLE001 - a reference that cannot be captured is timed call by call
            why = f"the reference cannot be captured: {type(e).__name__}: {str(e)[:300]}"
        head, _ = self.ask({"op": "capture", "seeds": seeds, "calls": calls}, "captured", 0)
        if head.get("why") and not why:
            why = f"the candidate cannot be captured: {str(head['why'])[:300]}"
        if self.agree_max(float(bool(why)))[0]:
            self.graph, self.graph_copies = None, []
            return why or "another rank could not capture its calls"
        return ""

    def use_graphs(self, calls: int, host: list[float]) -> str:
        """Capture both sides' batches as CUDA graphs where the mode asks for it ("on", or "auto"
        where either side spent most of its warm-up batch issuing calls), warm the replays up and
        size the batches; '' when the timed pairs will replay graphs, else why not."""
        mode = self.spec.get("graphs", "off") if self.device.type == "cuda" else "off"
        if mode == "off":
            return "off" if self.device.type == "cuda" else "not on CUDA"
        if mode == "auto" and max(host) <= GRAPH_HOST_FRACTION:
            return f"not host-bound ({max(host):.0%} of a batch spent issuing calls)"
        if mode == "auto" and self.mutating:  # one replay a batch (below): too short to time fairly
            return "the reference changes its inputs, so a batch could replay its graph only once"
        why_not = self.capture(calls)
        if why_not:
            return why_not
        for _ in range(3):  # replays until warm, both sides, each checked
            r, _ = self.ref_batch(calls)
            c, _, plan = self.cand_batch(calls)
            self.soft_failure = ""
            self.verify(calls, plan, -1, soft=True)
            if self.agree_max(float(bool(self.soft_failure)))[0]:
                # right when called, wrong when replayed (state kept on the host, such as an
                # epoch counter, is frozen in a graph): timed call by call, as it was checked
                self.graph, self.graph_copies = None, []
                return "the candidate's graph replays gave wrong results" + (
                    f" ({self.soft_failure[:300]})" if self.soft_failure else " on another rank"
                )
        if not self.mutating:
            # replays per batch, so that a batch still takes about batch_s: a graph's calls are
            # far shorter than the calls it was sized on, and each batch's fixed costs (round
            # trip, context switch) must stay small beside it. Inputs the reference changes
            # would change from one replay to the next: there, one replay a batch.
            per = max(self.agree_max(r, c)) * calls
            self.replays = int(self.agree_max(float(max(1, min(1000, math.ceil(self.spec["batch_s"] / max(per, 1e-7))))))[0])
        return ""

    def time(self) -> None:
        spec = self.spec
        first = self.inputs(spec["seed"] + 99)
        nbytes = sum(x.numel() * x.element_size() for x in cmp.tensors(first)) or 1
        l2 = torch.cuda.get_device_properties(self.device).L2_cache_size if self.device.type == "cuda" else 32 << 20
        self.copies = max(2, min(8, math.ceil(3 * l2 / nbytes)))
        del first
        keep = (8 << 30) if self.device.type == "cuda" else (256 << 20)  # bytes of outputs a batch may hold on to
        max_calls = max(1, min(1000, keep // self.out_bytes))
        t_start = time.perf_counter()

        # warm-up: batches of growing size until both sides' time per call is steady
        calls, hist, n_warm = 1, {"r": [], "c": []}, 0
        while True:
            r, rh = self.ref_batch(calls)
            c, ch, plan = self.cand_batch(calls)
            self.verify(calls, plan, -1)
            r, c = self.agree_max(r, c)
            hist["r"].append(r)
            hist["c"].append(c)
            n_warm += 1
            target = int(self.agree_max(float(max(1, min(max_calls, int(spec["batch_s"] / max(r, c, 1e-7))))))[0])
            steady = all(len(h) >= 3 and max(h[-3:]) <= 1.05 * min(h[-3:]) for h in hist.values())
            spent = time.perf_counter() - t_start
            done = (abs(calls - target) <= 0.1 * target and steady and spent >= spec["warmup_s"]) or spent >= spec[
                "warmup_s"
            ] + spec["max_warmup_s"]
            if self.agree_max(float(done))[0]:
                break
            if abs(calls - target) > 0.1 * target:
                calls, hist = target, {"r": [], "c": []}

        why_not = self.use_graphs(calls, self.agree_max(rh, ch))

        ref_ms, cand_ms, ref_host, cand_host, verified = [], [], [], [], 0
        t_timed = time.perf_counter()
        while True:
            order = ("r", "c") if len(ref_ms) % 2 == 0 else ("c", "r")
            for side in order:
                if side == "r":
                    r, rh = self.ref_batch(calls)
                else:
                    c, ch, plan = self.cand_batch(calls)
            verified += self.verify(calls, plan, len(ref_ms))
            r, c = self.agree_max(r, c)
            ref_ms.append(r * 1e3)
            cand_ms.append(c * 1e3)
            ref_host.append(rh)
            cand_host.append(ch)
            m = len(ref_ms)
            stop = 0.0
            if m >= spec["min_pairs"]:
                est, lo, hi = bootstrap_ci([a / b for a, b in zip(ref_ms, cand_ms)], spec["secret"] % (1 << 31) + m)
                width = (hi - lo) / est
                stop = float(
                    width <= spec["ci_width"] or m >= spec["max_pairs"] or time.perf_counter() - t_timed >= spec["time_budget_s"]
                )
            if self.agree_max(stop)[0]:
                break
        est, lo, hi = bootstrap_ci([a / b for a, b in zip(ref_ms, cand_ms)], spec["secret"] % (1 << 31))
        med = lambda xs: sorted(xs)[len(xs) // 2]  # noqa: E731
        self.chan.send(
            "timed",
            calls=calls * self.replays,
            ref_ms=ref_ms,
            cand_ms=cand_ms,
            speedup=est,
            ci=[lo, hi],
            pairs=len(ref_ms),
            warmup_batches=n_warm,
            verified=verified,
            copies=self.copies,
            ref_host=med(ref_host),
            cand_host=med(cand_host),
            graphs=self.graph is not None,
            graphs_why_not=why_not,
            seconds=time.perf_counter() - t_start,
        )


def main(spec_path: str, rank: int) -> None:
    die_with_parent()
    undumpable()
    spec = json.loads(open(spec_path).read())
    chan = Channel(int(os.environ["PKAGENT_CHECK_FD"]))
    sock = socket.socket(fileno=int(os.environ["PKAGENT_JUDGE_FD"]))
    judge = Judge(spec, rank, chan, sock)
    chan.send("started")
    try:
        judge.run()
    except Failed:
        pass
    try:
        wire.send(sock, {"op": "exit"})
    except OSError:
        pass


if __name__ == "__main__":
    try:
        main(sys.argv[1], int(sys.argv[2]))
    except BaseException as e:  # noqa: BLE001 - a failure of the judge itself: report, then die
        text = "".join(traceback.format_exception(type(e), e, e.__traceback__))
        try:
            Channel(int(os.environ["PKAGENT_CHECK_FD"])).send(
                "error",
                status="runtime_error",
                harness=True,
                message=f"the checker failed: {type(e).__name__}: {str(e)[:1500]}",
                tail=text[-4000:],
            )
        finally:
            os._exit(3)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
