"""The checker: one process per rank, spawned once per check, every deadline enforced here.

check() refuses what must not run (NVLink multicast where the environment disables it),
catches syntax errors without starting anything, then starts two processes per rank: a judge
(eval/judge.py: ours, never imports the candidate) and a runner (eval/runner.py: the candidate's
process, confined by eval/confine.py), joined by a socket. It follows the judges' progress
lines, kills everything when one fails or misses its deadline, and folds what they reported
into a CheckResult. docs/checker.md has the design and its threat model.
"""

from __future__ import annotations

import glob
import hashlib
import json
import math
import os
import re
import secrets
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

from configs.errors import UsageError
from eval.confine import ConfineError, bwrap_argv, candidate_env, resolve
from eval.result import CheckResult, Perf, Phases, RankDetail, Timing
from kernels_lib import multicast

ROOT = Path(__file__).resolve().parents[1]
SOURCE_SUFFIXES = (".py", ".cu", ".cuh", ".cpp", ".cc", ".h", ".hpp", ".ptx")


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


def _raw_nccl(sources: dict[str, str]) -> dict[str, int]:
    """NCCL called past torch.distributed (cupy.cuda.nccl, ctypes on libnccl, ncclAllReduce in
    C++): counted in the candidate's sources, since such calls never reach a process group."""
    found: dict[str, int] = {}
    for text in sources.values():
        for m in re.finditer(
            r"\bnccl(AllReduce|AllGather|ReduceScatter|Broadcast|Reduce|Send|Recv|AllToAll|GroupStart)\b|cupy\.cuda\.nccl|libnccl",
            text,
        ):
            key = "nccl (in source): " + m.group(0)
            found[key] = found.get(key, 0) + 1
    return found


def _timing(calls: int, ms: list[float], host: float, device: str) -> Timing:
    s = sorted(ms)
    gpu = device == "cuda"  # on CPU every call is the host's work: the notion does not apply
    return Timing(
        median_ms=s[len(s) // 2],
        min_ms=s[0],
        max_ms=s[-1],
        batches=len(s),
        calls_per_batch=calls,
        host_fraction=host if gpu else None,
        host_bound=host > 0.9 if gpu else None,
    )


def _perf(problem, timed: dict, world_size: int, size: float, device: str, hardware: str) -> tuple[Perf, str | None]:
    """The Perf of the judges' timed pairs; and, where the candidate measured faster than the
    hardware's peak can move its bytes, why that cannot be (a cheat or a broken clock). On CUDA
    the interval is at least as wide as the profile's measured run-to-run spread."""
    ref = _timing(timed["calls"], timed["ref_ms"], timed["ref_host"], device)
    cand = _timing(timed["calls"], timed["cand_ms"], timed["cand_host"], device)
    lo, hi = timed["ci"]
    perf = Perf(
        reference=ref,
        candidate=cand,
        speedup=timed["speedup"],
        speedup_ci=(lo, hi),
        pairs=timed["pairs"],
        verified_calls=timed["verified"],
        timing_s=timed["seconds"],
        graphs=bool(timed.get("graphs")),
        graphs_note=str(timed.get("graphs_why_not", ""))[:500],
    )
    impossible = None
    if device != "cuda":
        return perf, None
    import configs

    hw = configs.load_hardware(hardware)
    spread = hw.check_repro_graphs_pct if perf.graphs else hw.check_repro_pct
    if spread:  # what one run's pairs cannot see: the next run's processes land elsewhere
        f = 1 + spread / 100
        perf.speedup_ci = (min(lo, perf.speedup / f), max(hi, perf.speedup * f))
        perf.check_repro_pct = spread
        perf.hardware = hw.name
    if problem.roofline is not None:
        roof = problem.roofline(world_size, size)
        terms = roof.seconds(hw.link_gbs, hw.hbm_gbs, hw.bf16_tflops)
        perf.hardware = hw.name
        perf.roofline_ms = terms["bound"] * 1e3
        perf.roofline_terms_ms = {k: v * 1e3 for k, v in terms.items() if k != "bound"}
        perf.reference_roofline_fraction = perf.roofline_ms / ref.median_ms
        perf.candidate_roofline_fraction = perf.roofline_ms / cand.median_ms
        floor_ms = roof.seconds(hw.link_peak_gbs, hw.hbm_peak_gbs, hw.bf16_peak_tflops)["bound"] * 1e3
        if cand.median_ms < 0.9 * floor_ms:
            impossible = (
                f"the candidate measured {cand.median_ms * 1e3:.1f} us per call, under the {floor_ms * 1e3:.1f} us that "
                f"{hw.name}'s peak bandwidth and FLOPs allow for this problem: outputs it did not compute, or a clock it fooled"
            )
    return perf, impossible


def _ended(code: int) -> str:
    return f"killed by signal {signal.Signals(-code).name}" if code < 0 else f"exit code {code}"


class Ranks:
    """The processes of one check: a judge per rank (ours: progress lines on a pipe each) and
    the candidate's runners (confined; each talks only to its judge, over a socket)."""

    def __init__(
        self, world_size: int, tmp: Path, run: Path, mode: str, extra_env: tuple[str, ...], build: Path, readable: list[Path]
    ) -> None:
        self.world_size, self.tmp, self.run = world_size, tmp, run
        self.tag = uuid.uuid4().hex
        self.judges: list[subprocess.Popen] = []
        self.runners: list[subprocess.Popen] = []
        self.logs = []
        self.readers: dict[int, int] = {}
        self.buffers: dict[int, bytes] = {}
        self.sel = selectors.DefaultSelector()
        pairs = [socket.socketpair() for _ in range(world_size)]
        env = candidate_env(run / "home", run / "tmp", extra_env)
        env.update(
            PKAGENT_CHECK_TAG=self.tag,
            WORLD_SIZE=str(world_size),
            TORCH_EXTENSIONS_DIR=str(build / "torch_extensions"),
            PKAGENT_CACHE=str(build),
        )
        runner_fds = [b.fileno() for _, b in pairs]
        logs = run / "logs"
        # One launcher starts every rank: inside bubblewrap (so the ranks share its namespaces),
        # or as a subreaper that kills whatever the candidate left behind when it ends.
        prefix = bwrap_argv([run, build], run / "cand", run / "tmp", readable) if mode == "bwrap" else []
        launcher_env = {**env, "PKAGENT_RUNNER_FDS": ",".join(map(str, runner_fds))}
        if mode != "bwrap":
            launcher_env["PKAGENT_PARENT_PID"] = str(os.getpid())
        self.runners.append(
            subprocess.Popen(
                [*prefix, sys.executable, "-m", "eval.launch", str(run / "spec.json")],
                env=launcher_env,
                pass_fds=runner_fds,
                cwd=str(run / "cand"),
                stdout=open(logs / "launcher.log", "wb"),
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        )
        judge_env = {**candidate_env(tmp / "judge", tmp / "judge", extra_env), "PKAGENT_PARENT_PID": str(os.getpid())}
        if "PKAGENT_PIN" in os.environ:
            judge_env["PKAGENT_PIN"] = os.environ["PKAGENT_PIN"]
        for rank, (mine, theirs) in enumerate(pairs):
            theirs.close()
            r, w = os.pipe()
            log = open(tmp / f"judge{rank}.log", "wb")
            self.logs.append(log)
            self.judges.append(
                subprocess.Popen(
                    [sys.executable, "-m", "eval.judge", str(tmp / "judge.json"), str(rank)],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    cwd=str(tmp / "judge"),
                    env={**judge_env, "PKAGENT_CHECK_FD": str(w), "PKAGENT_JUDGE_FD": str(mine.fileno())},
                    pass_fds=(w, mine.fileno()),
                    start_new_session=True,
                )
            )
            os.close(w)
            mine.close()
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

    def runner_end(self, rank: int) -> str:
        """How rank `rank`'s candidate process ended, as its launcher wrote it down."""
        try:
            return _ended(int((self.run / "logs" / f"rank{rank}.exit").read_text()))
        except (OSError, ValueError):
            return ""

    def pump(self, wait: float) -> None:
        """Read every progress line the judges have written, waiting up to `wait` seconds."""
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
                    message = ev["message"]
                    if "ended without answering" in message:
                        time.sleep(0.2)
                        how = self.runner_end(rank)
                        message += f" ({how})" if how else ""
                    self.failure = (ev["status"], f"rank {rank}: {message}", rank)
                elif name == "trial" and not ev.get("ok") and self.failure is None:
                    self.failure = (
                        "cheating_detected" if ev.get("cheating") else "incorrect",
                        f"rank {rank}: {ev['message']}",
                        rank,
                    )
                elif name == "done":
                    self.done.add(rank)

    def follow(self, timeout: float) -> None:
        """Until every judge is done or one reports a failure, dies, or makes no progress for
        `timeout` seconds (then the ranks behind the others are the stuck ones)."""
        while len(self.done) < self.world_size and self.failure is None:
            self.pump(0.5)
            for rank, p in enumerate(self.judges):
                if self.failure is None and p.poll() is not None and rank not in self.done:
                    self.pump(0.2)  # what it wrote before it ended
                    if self.failure is None and rank not in self.done:
                        self.failure = (
                            "runtime_error",
                            f"the checker's rank {rank} process ended ({_ended(p.returncode)}); "
                            "this is a bug in the checker or the machine, not the candidate",
                            rank,
                        )
            now = time.monotonic()
            late = [r for r in range(self.world_size) if r not in self.done and now - self.last_progress[r] > timeout]
            if late and self.failure is None:
                ahead = max(len(evs) for evs in self.events.values())
                self.stuck = [r for r in late if len(self.events[r]) < ahead] or late
                where = self.events[self.stuck[0]][-1]["event"] if self.events[self.stuck[0]] else "start-up"
                self.failure = (
                    "timeout",
                    f"ranks {self.stuck} made no progress for {timeout:g} s (last step: {where}); "
                    "a deadlock (mismatched collectives, a wait that is never signalled) or a hang",
                    None,
                )

    def close(self) -> None:
        """Kill the candidate's processes (their process group or sandbox, then any process that
        still carries this check's tag: one that left the group), then end the judges."""
        for p in self.runners:  # the launcher kills what the candidate started, then itself
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=3)
                except subprocess.TimeoutExpired:
                    pass
        for p in self.runners + self.judges:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for pid in tagged(self.tag):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for p in self.runners + self.judges:
            p.wait()
        for log in self.logs:
            log.close()
        self.sel.close()


def tagged(tag: str) -> list[int]:
    """Live processes whose environment carries PKAGENT_CHECK_TAG=tag (Linux /proc)."""
    needle = f"PKAGENT_CHECK_TAG={tag}".encode()
    found = []
    for entry in glob.glob("/proc/[0-9]*"):
        try:
            with open(f"{entry}/environ", "rb") as f:
                if needle in f.read().split(b"\0"):
                    found.append(int(entry[6:]))
        except (OSError, ValueError):
            continue
    return [pid for pid in found if pid != os.getpid()]


def _fold(ranks: Ranks, base: dict, tmp: Path, perf: bool, t_start: float) -> CheckResult:
    """What the judges reported, as one CheckResult (without timings)."""
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
        if bad:
            details.append(
                RankDetail(
                    rank=r,
                    ok=False,
                    trial=bad.get("trial"),
                    message=bad.get("message", ""),
                    max_abs_err=bad.get("max_abs_err"),
                    max_rel_err=bad.get("max_rel_err"),
                    first_mismatch=bad.get("first_mismatch"),
                    output_path=bad.get("output_path", ""),
                )
            )
        else:  # done, or stopped because another rank failed first
            details.append(RankDetail(rank=r, ok=r in ranks.done or (failure is not None and failure[2] not in (None, r))))
    log_tail = ""
    if failure:
        rank = failure[2] if failure[2] is not None else (ranks.stuck or [0])[0]
        err = next((e for e in events[rank] if e.get("event") == "error"), {})
        texts = [err.get("tail") or ""]
        for name in ("launcher.log", f"rank{rank}.log"):
            f = ranks.run / "logs" / name
            if f.is_file():
                texts.append(f.read_text(errors="replace")[-3000:])
        if err.get("harness"):
            texts.append((tmp / f"judge{rank}.log").read_text(errors="replace")[-3000:])
        log_tail = "\n".join(t for t in texts if t)
    if failure:
        status, message, _ = failure
    else:
        status, message = "correct", f"all {world_size} ranks match the reference on {base['trials']} trials"
    return CheckResult(
        status=status,
        **base,
        message=message,
        ranks=details,
        stuck_ranks=ranks.stuck,
        phases=phases,
        log_tail=log_tail[-6000:],
        trials_passed=min(sum(1 for e in events[r] if e.get("event") == "trial" and e.get("ok")) for r in range(world_size)),
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
    batches: int = 10,
    batch_s: float = 0.02,
    warmup_s: float = 0.2,
    repeats: int = 16,
    ci_width: float = 0.02,
    time_budget_s: float | None = None,
    max_pairs: int = 200,
    confine: str = "auto",
    pass_env: tuple[str, ...] = (),
    graphs: str = "auto",
) -> CheckResult:
    """Check `candidate` against `problem`; see the module docstring and docs/checker.md.

    `batches` is the least number of timed pairs (reference batch, candidate batch); pairs go
    on until the speedup's 95 % interval is narrower than `ci_width` (relative), `max_pairs`
    or `time_budget_s`. `repeats`: calls per trial on identical inputs (a race shows as
    disagreement). `confine`: auto (bubblewrap where it works), bwrap, or none. `graphs`: time
    CUDA-graph replays of both sides' batches: auto (where a side is host-bound), on, or off.
    `time_budget_s` defaults to 6 s on CUDA and 2 s on CPU (gloo timings are for testing).
    Raises UsageError for arguments that are wrong before anything runs.
    """
    if time_budget_s is None:
        time_budget_s = 6.0 if device == "cuda" else 2.0
    from eval.problem import ProblemError
    from eval.suites import load, qualify

    t_start = time.perf_counter()
    path = Path(candidate).resolve()
    if not path.is_file():
        raise UsageError(f"candidate {candidate}: no such file")
    if device not in ("cuda", "cpu"):
        raise UsageError(f"--device {device!r}: expected cuda or cpu")
    for name, value in (
        ("--size", size),
        ("--timeout", timeout),
        ("batch_s", batch_s),
        ("warmup_s", warmup_s),
        ("--ci-width", ci_width),
        ("--time-budget", time_budget_s),
    ):
        if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
            raise UsageError(f"{name} must be a positive finite number, not {value!r}")
    if graphs not in ("auto", "on", "off"):
        raise UsageError(f"--graphs {graphs!r}: expected auto, on or off")
    if min(trials, world_size, batches, repeats, max_pairs) < 1:
        raise UsageError("--trials, --world-size, --repeats and the number of timed pairs must be positive")
    try:
        mode = resolve(confine)
    except ConfineError as e:
        raise UsageError(str(e)) from None
    if perf:
        import configs

        configs.load_hardware(hardware)  # an unknown profile is a ConfigError (a UsageError) now, not after the check
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
            raise UsageError(
                f"--world-size {world_size} needs {world_size} GPUs; {torch.cuda.device_count()} visible (use --device cpu for gloo)"
            )

    base = dict(problem=prob.id, candidate=str(path), world_size=world_size, device=device, trials=trials, confinement=mode)
    sources = _sources(path)
    off = multicast.disabled_by()
    if off:
        hits = {name: multicast.mentions(text) for name, text in sources.items()}
        hits = {k: v for k, v in hits.items() if v}
        if hits:
            where = "; ".join(f"{k}: {', '.join(v)}" for k, v in hits.items())
            return CheckResult(
                status="refused",
                **base,
                message=(
                    f"refused, nothing was run: NVLink multicast is disabled here ({', '.join(off)}) and the candidate mentions it ({where}). "
                    "Use peer loads/stores or TMA instead of multimem/multicast."
                ),
            )
    try:
        compile(sources[path.name], str(path), "exec")
    except SyntaxError as e:
        return CheckResult(status="compile_error", **base, message=f"Python syntax error at line {e.lineno}: {e.msg}")

    digest = hashlib.sha256("".join(f"{k}\0{v}" for k, v in sorted(sources.items())).encode()).hexdigest()[:16]
    build = _cache_dir() / "checks" / digest  # the candidate's builds: its own folder, reused by a re-check
    try:
        (build / "torch_extensions").mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix="pkagent-check-"))
    except OSError as e:
        raise UsageError(f"cannot create the check's folders ({e}); set PKAGENT_CACHE or TMPDIR to a writable place") from None
    ranks = None
    old = _on_sigterm()
    try:
        # The candidate sees a copy of exactly the sources scanned above, in a scratch folder.
        run = tmp / "run"
        for sub in ("cand", "logs", "home", "tmp"):
            (run / sub).mkdir(parents=True)
        (tmp / "judge").mkdir()
        for name, text in sources.items():
            (run / "cand" / name).write_text(text)
        from torch.distributed import TCPStore

        # The judges' rendezvous lives here, on a port the kernel picked; the runners meet in a FileStore.
        store = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
        (run / "spec.json").write_text(
            json.dumps(
                dict(
                    problem=ref,
                    candidate=str(run / "cand" / path.name),
                    world_size=world_size,
                    device=device,
                    size=size,
                    store=str(run / "store"),
                    timeout=timeout,
                )
            )
        )
        (tmp / "judge.json").write_text(
            json.dumps(
                dict(
                    problem=ref,
                    world_size=world_size,
                    device=device,
                    trials=trials,
                    perf=perf,
                    size=size,
                    seed=seed,
                    port=store.port,
                    secret=secrets.randbits(62),
                    repeats=repeats,
                    batch_s=batch_s,
                    warmup_s=warmup_s,
                    max_warmup_s=2.0 if device == "cuda" else 1.0,
                    min_pairs=batches,
                    max_pairs=max(batches, max_pairs),
                    ci_width=ci_width,
                    time_budget_s=time_budget_s,
                    graphs=graphs,
                )
            )
        )
        suite_root = [Path(ref[len("pkb:") :].rpartition("::")[0])] if ref.startswith("pkb:") else []
        ranks = Ranks(world_size, tmp, run, mode, tuple(pass_env), build, suite_root)
        ranks.follow(timeout)
        ranks.close()
        result = _fold(ranks, base, tmp, perf, t_start)
        raw = _raw_nccl(sources)
        if raw:
            result.collectives.update(raw)
        timed = next((e for e in ranks.events[0] if e.get("event") == "timed"), None)
        if result.status == "correct" and perf and timed:
            result.perf, impossible = _perf(prob, timed, world_size, size, device, hardware)
            if impossible:
                result.status, result.message = "cheating_detected", impossible
        del store
        return result
    finally:
        if ranks is not None:
            ranks.close()
        shutil.rmtree(tmp, ignore_errors=True)
        _restore_sigterm(old)


def _on_sigterm():
    """SIGTERM as an exception while a check runs (main thread only), so that its processes
    are killed and its folder removed on the way out."""
    if threading.current_thread() is not threading.main_thread():
        return None

    def stop(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    return signal.signal(signal.SIGTERM, stop)


def _restore_sigterm(old) -> None:
    if old is not None:
        signal.signal(signal.SIGTERM, old)
