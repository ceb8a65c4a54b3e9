"""The checker: one process per rank, spawned once per check, every deadline enforced here.

check() refuses what must not run (NVLink multicast where the environment disables it),
catches syntax errors without starting anything, then starts `python -m eval.worker` once per
rank, follows each rank's progress lines, kills every rank when one dies or misses its
deadline, and folds what they reported into a CheckResult.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from eval.result import CheckResult, Perf, Phases, RankDetail, Timing
from kernels_lib import multicast

ROOT = Path(__file__).resolve().parents[1]
SOURCE_SUFFIXES = (".py", ".cu", ".cuh", ".cpp", ".cc", ".h", ".hpp", ".ptx")


class UsageError(Exception):
    """Bad arguments: the command line turns this into exit code 2."""


def _sources(candidate: Path) -> dict[str, str]:
    """The candidate and what it may build or load from its folder: the CUDA/C++ sources
    beside it, and the Python modules beside it that it imports by name."""
    text = candidate.read_text(errors="replace")
    out = {candidate.name: text}
    for p in sorted(candidate.parent.iterdir()):
        if p == candidate or not p.is_file() or p.suffix not in SOURCE_SUFFIXES or p.stat().st_size > 2 << 20:
            continue
        if p.suffix == ".py" and not re.search(rf"\b(import|from)\s+{re.escape(p.stem)}\b", text):
            continue
        out[p.name] = p.read_text(errors="replace")
    return out


def _cache_dir() -> Path:
    return Path(os.environ.get("PKAGENT_CACHE", Path.home() / ".cache" / "pkagent"))


def _rank_env(rank: int, world_size: int, fd: int, build_dir: Path) -> dict[str, str]:
    env = multicast.off_env() if multicast.disabled_by() else dict(os.environ)
    env.update(
        RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world_size), LOCAL_WORLD_SIZE=str(world_size),
        PKAGENT_CHECK_FD=str(fd), PYTHONUNBUFFERED="1",
        TORCH_EXTENSIONS_DIR=str(build_dir),  # load_inline builds of different candidates never collide
        PYTHONPATH=os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
    )
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def _perf(problem, timings: dict[int, dict], world_size: int, size: float, device: str, hardware: str) -> Perf:
    def fold(which: str) -> Timing:
        per_rank = [sorted(t[which]["ms"]) for t in timings.values()]
        med = [ms[len(ms) // 2] for ms in per_rank]
        worst = max(range(len(med)), key=med.__getitem__)
        return Timing(median_ms=med[worst], min_ms=per_rank[worst][0], max_ms=per_rank[worst][-1],
                      batches=len(per_rank[worst]), calls_per_batch=timings[0][which]["calls"])

    ref, cand = fold("reference"), fold("candidate")
    perf = Perf(reference=ref, candidate=cand, speedup=ref.median_ms / cand.median_ms)
    if problem.roofline is not None and device == "cuda":
        import configs

        hw = configs.load_hardware(hardware)
        terms = problem.roofline(world_size, size).seconds(hw.link_gbs, hw.hbm_gbs, hw.bf16_tflops)
        perf.hardware = hw.name
        perf.roofline_ms = terms["bound"] * 1e3
        perf.roofline_terms_ms = {k: v * 1e3 for k, v in terms.items() if k != "bound"}
        perf.reference_roofline_fraction = perf.roofline_ms / ref.median_ms
        perf.candidate_roofline_fraction = perf.roofline_ms / cand.median_ms
    return perf


def _ended(code: int) -> str:
    return f"killed by signal {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"


class Ranks:
    """The rank processes of one check and what they have reported: each rank writes JSON
    progress lines to its own pipe; its stdout and stderr go to DIR/rankN.log."""

    def __init__(self, world_size: int, tmp: Path, cwd: Path, env_for) -> None:
        self.world_size, self.tmp = world_size, tmp
        self.procs: list[subprocess.Popen] = []
        self.logs = []
        self.readers: dict[int, int] = {}  # pipe fd -> rank
        self.buffers: dict[int, bytes] = {}
        self.sel = selectors.DefaultSelector()
        for rank in range(world_size):
            r, w = os.pipe()
            log = open(tmp / f"rank{rank}.log", "wb")
            self.logs.append(log)
            self.procs.append(subprocess.Popen(
                [sys.executable, "-m", "eval.worker", str(tmp / "spec.json"), str(rank)],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=str(cwd),
                env=env_for(rank, w), pass_fds=(w,), start_new_session=True,
            ))
            os.close(w)
            self.readers[r], self.buffers[r] = rank, b""
            self.sel.register(r, selectors.EVENT_READ)
        self.events: dict[int, list[dict]] = {r: [] for r in range(world_size)}
        self.done: set[int] = set()
        self.failure: tuple[str, str, int | None] | None = None  # (status, message, rank to blame)
        self.stuck: list[int] = []
        self.marks: dict[str, float] = {}  # when every rank had reached ready / collectives / done
        self.last_progress = {r: time.monotonic() for r in range(world_size)}

    def has(self, rank: int, event: str) -> bool:
        return any(e.get("event") == event for e in self.events[rank])

    def pump(self, wait: float) -> None:
        """Read every progress line the ranks have written, waiting up to `wait` seconds."""
        for key, _ in self.sel.select(timeout=wait):
            chunk, rank = os.read(key.fd, 1 << 16), self.readers[key.fd]
            if not chunk:
                self.sel.unregister(key.fd)
                os.close(key.fd)
                continue
            *lines, self.buffers[key.fd] = (self.buffers[key.fd] + chunk).split(b"\n")
            for line in lines:
                try:
                    ev = json.loads(line)
                except json.JSONDecodeError:
                    continue
                self.events[rank].append(ev)
                self.last_progress[rank] = time.monotonic()
                name = ev.get("event")
                if name in ("ready", "collectives", "done") and all(self.has(r, name) for r in self.events):
                    self.marks.setdefault(name, time.perf_counter())
                if name == "error" and self.failure is None:
                    self.failure = (ev["status"], f"rank {rank}: {ev['message']}", rank)
                elif name == "trial" and ev.get("cheating") and self.failure is None:
                    self.failure = ("cheating_detected", f"rank {rank}: {ev['message']}", rank)
                elif name == "done":
                    self.done.add(rank)

    def follow(self, timeout: float) -> None:
        """Until every rank is done or one fails: dies, reports an error, or makes no progress
        for `timeout` seconds (then the ranks behind the others are the stuck ones)."""
        while len(self.done) < self.world_size and self.failure is None:
            self.pump(0.5)
            for rank, p in enumerate(self.procs):
                if self.failure is None and p.poll() is not None and rank not in self.done:
                    self.pump(0.2)  # what it wrote before it ended
                    if self.failure is None and rank not in self.done:
                        self.failure = ("runtime_error", f"rank {rank} process ended ({_ended(p.returncode)}) before finishing the check", rank)
            now = time.monotonic()
            late = [r for r in range(self.world_size) if r not in self.done and now - self.last_progress[r] > timeout]
            if late and self.failure is None:
                ahead = max(len(evs) for evs in self.events.values())
                self.stuck = [r for r in late if len(self.events[r]) < ahead] or late
                where = self.events[self.stuck[0]][-1]["event"] if self.events[self.stuck[0]] else "start-up"
                self.failure = ("timeout", f"ranks {self.stuck} made no progress for {timeout:g} s (last step: {where}); "
                                "a deadlock (mismatched collectives, a wait that is never signalled) or a hang", None)
        if self.failure and self.failure[0] == "runtime_error":
            # A rank that died silently is the cause; its peers' errors (connection reset,
            # NCCL abort) are the effect. Give the death a moment to show before blaming.
            time.sleep(0.3)
            self.pump(0.2)
            for rank, p in enumerate(self.procs):
                if p.poll() and rank != self.failure[2] and not self.has(rank, "error"):
                    self.failure = ("runtime_error", f"rank {rank} process ended ({_ended(p.returncode)}) before finishing the check", rank)
                    break

    def close(self) -> None:
        """End every rank process group (SIGKILL after a failure) and wait for them."""
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL if self.failure else signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + 10
        for p in self.procs:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        for log in self.logs:
            log.close()
        self.sel.close()


def _fold(ranks: Ranks, base: dict, tmp: Path, perf: bool, t_start: float) -> CheckResult:
    """What the ranks reported, as one CheckResult (without timings)."""
    events, failure, world_size = ranks.events, ranks.failure, ranks.world_size
    t_end, marks = time.perf_counter(), ranks.marks
    phases = Phases(
        startup_s=marks.get("ready", t_end) - t_start,
        correctness_s=marks.get("collectives", t_end) - marks.get("ready", t_end),
        timing_s=(marks.get("done", t_end) - marks.get("collectives", t_end)) if perf else 0.0,
        total_s=t_end - t_start,
    )
    details = []
    for r in range(world_size):
        bad = next((e for e in events[r] if e.get("event") in ("trial", "error") and not e.get("ok")), None)
        fresh = next((e for e in events[r] if e.get("event") == "fresh"), None)
        if bad:
            details.append(RankDetail(rank=r, ok=False, trial=bad.get("trial"), message=bad.get("message", ""),
                                      max_abs_err=bad.get("max_abs_err"), max_rel_err=bad.get("max_rel_err"),
                                      first_mismatch=bad.get("first_mismatch"), output_path=bad.get("output_path", "")))
        elif fresh and not fresh["ok"]:
            details.append(RankDetail(rank=r, ok=False, message="stale result after inputs changed in place: " + fresh.get("message", "")))
        else:
            details.append(RankDetail(rank=r, ok=r in ranks.done))
    log_tail = ""
    if failure or any(not d.ok for d in details):
        rank = failure[2] if failure and failure[2] is not None else next((d.rank for d in details if not d.ok), 0)
        text = (tmp / f"rank{rank}.log").read_text(errors="replace")
        err = next((e for e in events[rank] if e.get("event") == "error"), {})
        log_tail = (err.get("tail") or "") + ("\n" + text[-3000:] if text else "")
    first = next((d for d in details if not d.ok), None)
    if failure:
        status, message, _ = failure
    elif first and first.message.startswith("stale result"):
        status, message = "cheating_detected", first.message
    elif first:
        status, message = "incorrect", f"rank {first.rank}, trial {first.trial}: {first.message}"
    else:
        status, message = "correct", f"all {world_size} ranks match the reference on {base['trials']} trials"
    return CheckResult(
        status=status, **base, message=message, ranks=details, stuck_ranks=ranks.stuck, phases=phases, log_tail=log_tail[-6000:],
        trials_passed=min(sum(1 for e in events[r] if e.get("event") == "trial" and e["ok"]) for r in range(world_size)),
        collectives=next((e["counts"] for e in events[0] if e.get("event") == "collectives"), {}),
    )


def check(
    candidate: str | Path,
    problem: str,
    world_size: int = 2,
    device: str = "cuda",
    trials: int = 5,
    perf: bool = False,
    size: float = 1.0,
    timeout: float = 300.0,
    hardware: str = "h200_2",
    suite: str | None = None,
    seed: int = 0,
    batches: int = 15,
    batch_s: float = 0.02,
    warmup_s: float = 0.2,
) -> CheckResult:
    """Check `candidate` against `problem`; see the module docstring and docs for the method.

    Raises UsageError for arguments that are wrong before anything runs.
    """
    from eval.problem import ProblemError
    from eval.suites import load, qualify

    t_start = time.perf_counter()
    path = Path(candidate).resolve()
    if not path.is_file():
        raise UsageError(f"candidate {candidate}: no such file")
    if device not in ("cuda", "cpu"):
        raise UsageError(f"--device {device!r}: expected cuda or cpu")
    if trials < 1 or world_size < 1 or size <= 0 or timeout <= 0:
        raise UsageError("--trials, --world-size, --size and --timeout must be positive")
    try:
        ref = qualify(problem, suite)
        prob = load(ref)
    except ProblemError as e:
        raise UsageError(str(e)) from None
    if world_size not in prob.meta.world_sizes:
        raise UsageError(f"problem {prob.id} supports world sizes {list(prob.meta.world_sizes)}, not {world_size}")
    if device == "cuda":
        import torch

        if torch.cuda.device_count() < world_size:
            raise UsageError(f"--world-size {world_size} needs {world_size} GPUs; {torch.cuda.device_count()} visible (use --device cpu for gloo)")

    base = dict(problem=prob.id, candidate=str(path), world_size=world_size, device=device, trials=trials)
    sources = _sources(path)
    off = multicast.disabled_by()
    if off:
        hits = {name: multicast.mentions(text) for name, text in sources.items()}
        hits = {k: v for k, v in hits.items() if v}
        if hits:
            where = "; ".join(f"{k}: {', '.join(v)}" for k, v in hits.items())
            return CheckResult(status="refused", **base, message=(
                f"refused, nothing was run: NVLink multicast is disabled here ({', '.join(off)}) and the candidate mentions it ({where}). "
                "Use peer loads/stores or TMA instead of multimem/multicast."))
    try:
        compile(sources[path.name], str(path), "exec")
    except SyntaxError as e:
        return CheckResult(status="compile_error", **base, message=f"Python syntax error at line {e.lineno}: {e.msg}")

    digest = hashlib.sha256("".join(f"{k}\0{v}" for k, v in sorted(sources.items())).encode()).hexdigest()[:16]
    build_dir = _cache_dir() / "torch_extensions" / digest
    build_dir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="pkagent-check-"))
    from torch.distributed import TCPStore

    # The rendezvous store lives here, on a port the kernel picked: no race for a free port.
    store = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
    spec = dict(problem=ref, candidate=str(path), world_size=world_size, device=device, trials=trials, perf=perf,
                size=size, seed=seed, port=store.port, batches=batches, batch_s=batch_s, warmup_s=warmup_s)
    (tmp / "spec.json").write_text(json.dumps(spec))

    ranks = Ranks(world_size, tmp, path.parent, lambda rank, fd: _rank_env(rank, world_size, fd, build_dir))
    try:
        ranks.follow(timeout)
    finally:
        ranks.close()
    result = _fold(ranks, base, tmp, perf, t_start)
    if result.status == "correct" and perf:
        timings = {r: {e["which"]: e for e in ranks.events[r] if e.get("event") == "timed"} for r in range(world_size)}
        result.perf = _perf(prob, timings, world_size, size, device, hardware)
    shutil.rmtree(tmp, ignore_errors=True)
    del store
    return result
