"""`pkagent search`: the fastest verified kernel for one problem, within a budget, unattended.

    parallel workers at once, each one sample of solve() (agent or zero-shot), run by the executors
    of `pkagent run` (local: a child process per sample, GPUs from the runner's pool; ray: one task
    per sample). A new sample starts from scratch, or (a `refine_fraction` of them) from the best
    kernel so far: its source, what the checker measured for it and its leaderboard place go into
    the prompt (SolveConfig.refine). Workers never see each other's transcripts.

    screen     every correct sample is timed once, reference and candidate in the same run: the
               trusted check of solve() on CUDA; on CPU, where solve() does not time, a second
               check with --perf. The leaderboard ranks by the best time known for each kernel.
    verify     a screened time below the best verified time earns a re-check before it can win:
               verify.trials correctness trials and verify.batches timed batches on fresh inputs
               (seed verify.seed + sample), at `size` and at size x verify.size_factor, each
               against the reference timed in the same run. Its verified time at `size` is the
               one that counts; a kernel that was fast only once is ranked by its verified time
               and does not win. The best is the fastest kernel correct in both re-checks.
    stop       no new sample once max_samples have started, budget_usd is spent, the best reaches
               target_roofline (fraction of the hardware roofline, CUDA) or target_speedup, or
               none of the last `patience` samples improved the best; running samples finish and
               are verified.

The search directory (OUT):

    search.json                     the config
    samples/sample_<k>/             a finished sample: transcript.jsonl, solution.py, result.json
                                    (its screen check), lineage.json (the sample it refined)
    verify/sample_<k>/              a finished re-check: solution.py, verify.json (both checks)
    best/                           solution.py and result.json (screen and verified checks)
    leaderboard.json, leaderboard.txt, progress.png

Samples and re-checks are written as `pkagent run` writes samples (a hidden folder renamed when
done); everything else is derived from them and rewritten atomically, so a search killed at any
moment resumes by rerunning the same command: finished samples and re-checks are kept, those in
flight are run again.
"""

from __future__ import annotations

import json
import math
import shutil
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, List, Literal, Optional

import typer
from pydantic import Field

from agent.solve import Refine, SolveConfig, SolveResult, solve
from agent.trusted import Gpus, check_kernel
from configs import (
    ConfigError,
    SampleSettings,
    Strict,
    apply_overrides,
    read_yaml,
    resolve,
    validate,
)
from configs.files import write_atomic
from experiments.executors import Task, run_tasks
from experiments.experiment import finish, lock, make_executor, read_result


class VerifyConfig(Strict):
    trials: int = Field(default=20, ge=1, description="correctness trials of each re-check")
    batches: int = Field(default=45, ge=3, description="timed batches of each re-check (a screen times 15)")
    size_factor: float = Field(default=4.0, gt=0, description="the second re-check runs at size x this")
    seed: int = Field(default=1000, description="re-check inputs: seed + sample index (screens use seed 0)")


class SearchConfig(SampleSettings):
    problem: str
    model: str = Field(description="PROVIDER:MODEL, e.g. anthropic:claude-sonnet-4-6, or replay:PATH")
    mode: Literal["agent", "zero-shot"] = "agent"
    base_url: Optional[str] = None
    parallel: int = Field(default=2, ge=1, description="samples at once")
    max_samples: int = Field(default=20, ge=1)
    budget_usd: Optional[float] = Field(default=None, ge=0, description="no new sample once this is spent")
    target_roofline: Optional[float] = Field(default=None, gt=0, description="stop at this roofline fraction (CUDA)")
    target_speedup: Optional[float] = Field(default=None, gt=0, description="stop at this speedup over the reference")
    refine_fraction: float = Field(default=0.5, ge=0, le=1, description="share of samples that start from the best")
    patience: Optional[int] = Field(default=None, ge=1, description="stop when none of the last K samples improved")
    out: Optional[str] = Field(default=None, description="the search directory (default runs/search/PROBLEM)")
    gpus: Optional[List[int]] = None
    executor: Literal["local", "ray"] = "local"
    ray_address: Optional[str] = None
    verify: VerifyConfig = Field(default_factory=VerifyConfig)


def load_search(config: str | None = None, overrides: list[str] | None = None, **fields: Any) -> SearchConfig:
    """A YAML file (or the name of one under configs/search/), then the command-line options,
    then key=value overrides; validated, and checked against the suite and the model spec."""
    path = resolve("search", config) if config else None
    data = read_yaml(path) if path else {}
    data.update({k: v for k, v in fields.items() if v is not None})
    cfg = validate(SearchConfig, apply_overrides(data, overrides or []), str(path or "search"))
    from eval.problem import ProblemError, load_problem

    try:
        problem = load_problem(cfg.problem)
    except ProblemError as e:
        raise ConfigError(f"problem: {e}") from None
    if cfg.world_size not in problem.meta.world_sizes:
        raise ConfigError(f"problem: {cfg.problem} supports world sizes {list(problem.meta.world_sizes)}, "
                          f"not world_size={cfg.world_size}")
    if not cfg.check.perf:
        raise ConfigError("check.perf: the search ranks kernels by their measured time; it must be true")
    if cfg.target_roofline is not None and cfg.device != "cuda":
        raise ConfigError("target_roofline: roofline fractions are measured on CUDA only; on CPU use target_speedup")
    from agent.models import get_model
    from configs import load_hardware

    load_hardware(cfg.hardware)
    get_model(cfg.model, cfg.agent, base_url=cfg.base_url)
    return cfg


# --- the jobs: one sample, one re-check (run by the executors, in a child process or a Ray task) ---------


def sample_job(task: Task, gpus: Gpus | None) -> SolveResult:
    """solve(), then on CPU a timed check of a correct candidate (solve() times on CUDA only)."""
    cfg = task.solve
    out = Path(task.tmp)
    result = solve(cfg, out, gpus if cfg.device == "cuda" else None)
    if result.correct and result.check.perf is None:
        screen = check_kernel(cfg, out / "solution.py", gpus, perf=True)
        result = result.model_copy(update=dict(check=screen, correct=screen.ok,
                                               message=result.message + "; timed by a second check (solve() times on CUDA only)"))
        write_atomic(out / "result.json", result.model_dump_json(indent=2) + "\n")
    return result


class VerifyResult(SolveResult):
    """A re-check's record (verify/sample_<k>/result.json): the same fields as a sample's, its
    check the re-check at `size`; both re-checks are in verify.json beside it."""

    status: Literal["verified", "verify_failed", "error"]


def verify_job(v: VerifyConfig, task: Task, gpus: Gpus | None) -> VerifyResult:
    """The re-check of task.candidate: fresh inputs, many trials, at size and at the larger size."""
    cfg = task.solve
    out = Path(task.tmp)
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(task.candidate, out / "solution.py")
    t0 = time.monotonic()
    checks = {}
    for name, size in (("default", cfg.size), ("large", cfg.size * v.size_factor)):
        checks[name] = check_kernel(cfg, out / "solution.py", gpus, perf=True, trials=v.trials, batches=v.batches,
                                    size=size, seed=v.seed + task.sample)
        if not checks[name].ok:
            break
    write_atomic(out / "verify.json", json.dumps({k: c.model_dump(mode="json") for k, c in checks.items()}, indent=2) + "\n")
    ok = len(checks) == 2 and all(c.ok for c in checks.values())
    return VerifyResult(problem=cfg.problem, model=cfg.model, mode=cfg.mode, status="verified" if ok else "verify_failed",
                       correct=ok, check=checks["default"], wall_s=round(time.monotonic() - t0, 3), out_dir=str(out),
                       message="; ".join(f"{k}: {c.status}: {c.message}" for k, c in checks.items()))


# --- the search's state: read back from its directory --------------------------------------------------


@dataclass
class Entry:
    """One finished sample, and its re-check once that has finished."""

    k: int
    result: SolveResult  # its check is the screen
    parent: int | None  # the sample it refined
    verify: dict | None = None  # {"default": CheckResult, "large": CheckResult}; {} when the re-check died

    @property
    def screen(self):
        c = self.result.check
        return c if self.result.correct and c is not None and c.perf is not None else None

    @property
    def screen_ms(self) -> float | None:
        return self.screen.perf.candidate.median_ms if self.screen else None

    @property
    def verified(self) -> bool:
        return bool(self.verify) and len(self.verify) == 2 and all(c.ok for c in self.verify.values())

    @property
    def verified_ms(self) -> float | None:
        return self.verify["default"].perf.candidate.median_ms if self.verified else None

    @property
    def time_ms(self) -> float | None:
        """What ranks it: the verified time once re-checked (None when the re-check failed), else the screen."""
        return self.verified_ms if self.verify is not None else self.screen_ms


class State:
    def __init__(self, root: Path):
        self.root = root
        self.entries: dict[int, Entry] = {}
        for d in sorted((root / "samples").glob("sample_*")):
            result = read_result(d)
            if result is not None:
                lineage = _read_json(d / "lineage.json") or {}
                k = int(d.name.split("_")[1])
                self.entries[k] = Entry(k, result, lineage.get("refined"))
        for d in (root / "verify").glob("sample_*"):
            k = int(d.name.split("_")[1])
            if k in self.entries and read_result(d, VerifyResult) is not None:
                self.attach(k, d)

    def attach(self, k: int, folder: Path) -> None:
        from eval.result import CheckResult

        data = _read_json(folder / "verify.json") or {}
        self.entries[k].verify = {name: CheckResult.model_validate(c) for name, c in data.items()}

    @property
    def best(self) -> Entry | None:
        return min((e for e in self.entries.values() if e.verified), key=lambda e: e.verified_ms, default=None)

    @property
    def cost(self) -> float:
        return sum(e.result.cost_usd for e in self.entries.values())

    def improvements(self) -> set[int]:
        """The samples that beat every verified kernel of the samples before them."""
        out, low = set(), math.inf
        for k in sorted(self.entries):
            if self.entries[k].verified and self.entries[k].verified_ms < low:
                out.add(k)
                low = self.entries[k].verified_ms
        return out

    def needs_verify(self, e: Entry) -> bool:
        best = self.best
        return e.screen_ms is not None and e.verify is None and (best is None or e.screen_ms < best.verified_ms)

    def ranked(self) -> list[Entry]:
        """Correct kernels by time (fastest first), then those whose re-check failed."""
        ok = [e for e in self.entries.values() if e.screen is not None]
        return sorted(ok, key=lambda e: (e.time_ms is None, e.time_ms or 0.0, e.k))


def _read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


# --- deciding: refine or not, stop or not ------------------------------------------------------------------


def refines(k: int, fraction: float) -> bool:
    """Whether sample k starts from the best: `fraction` of the samples, spread evenly."""
    return math.floor((k + 1) * fraction) > math.floor(k * fraction)


def measured(c, size: float) -> dict | None:
    """A timed check as the leaderboard records it."""
    if c is None or c.perf is None:
        return None
    p = c.perf
    return {"size": size, "trials": c.trials, "ms": p.candidate.median_ms, "min_ms": p.candidate.min_ms,
            "max_ms": p.candidate.max_ms, "batches": p.candidate.batches, "reference_ms": p.reference.median_ms,
            "speedup": p.speedup, "roofline_fraction": p.candidate_roofline_fraction, "roofline_ms": p.roofline_ms,
            "hardware": p.hardware}


def feedback(cfg: SearchConfig, state: State, e: Entry) -> str:
    """What a refining sample is told about the kernel it starts from."""
    d, large = e.verify["default"], e.verify["large"]
    p = d.perf
    text = (f"correct on {d.trials} trials at size {cfg.size:g} and {large.trials} at size {cfg.size * cfg.verify.size_factor:g} "
            f"(fresh inputs); {p.candidate.median_ms:.4g} ms per call (median of {p.candidate.batches} batches, "
            f"{p.candidate.min_ms:.4g} to {p.candidate.max_ms:.4g}) against the reference's {p.reference.median_ms:.4g} ms "
            f"timed in the same run: speedup {p.speedup:.2f}x")
    if p.candidate_roofline_fraction is not None:
        bound = max(p.roofline_terms_ms, key=p.roofline_terms_ms.get) if p.roofline_terms_ms else "roofline"
        text += (f", {p.candidate_roofline_fraction:.0%} of the {p.hardware} roofline ({p.roofline_ms:.4g} ms, "
                 f"{bound}-bound)")
    if large.perf:
        text += f"; at size {cfg.size * cfg.verify.size_factor:g}: {large.perf.candidate.median_ms:.4g} ms, speedup {large.perf.speedup:.2f}x"
    if d.collectives:
        text += "; it calls torch.distributed " + ", ".join(f"{k} x{v}" for k, v in d.collectives.items())
    n = len([x for x in state.entries.values() if x.screen is not None])
    return text + f". It is the fastest of the {n} correct kernels found so far."


def stop_reason(cfg: SearchConfig, state: State, running_samples: int, verifying: set[int]) -> str | None:
    if len(state.entries) + running_samples >= cfg.max_samples:
        return f"sample limit: {cfg.max_samples} samples"
    if cfg.budget_usd is not None and state.cost >= cfg.budget_usd:
        return f"budget: ${state.cost:.4f} of ${cfg.budget_usd:.2f} spent"
    best = state.best
    if best is not None:
        p = best.verify["default"].perf
        if cfg.target_roofline is not None and (p.candidate_roofline_fraction or 0) >= cfg.target_roofline:
            return f"target: sample {best.k} runs at {p.candidate_roofline_fraction:.0%} of the roofline"
        if cfg.target_speedup is not None and p.speedup >= cfg.target_speedup:
            return f"target: sample {best.k} is {p.speedup:.2f}x faster than the reference"
    if cfg.patience is not None:
        last = sorted(state.entries)[-cfg.patience:]
        better = state.improvements()
        if len(last) == cfg.patience and not any(k in better or k in verifying or state.needs_verify(state.entries[k])
                                                  for k in last):
            return f"patience: none of the last {cfg.patience} samples improved the best"
    return None


# --- running -------------------------------------------------------------------------------------------------


def _task(folder: Path, k: int, solve: SolveConfig, job: Callable[[Task, Gpus | None], SolveResult],
          candidate: str | None = None) -> Task:
    d = folder / f"sample_{k}"
    return Task(solve=solve, sample=k, dir=str(d), tmp=str(folder / f".sample_{k}.{uuid.uuid4().hex[:8]}.tmp"),
                candidate=candidate, job=job)


def _solve_config(cfg: SearchConfig) -> SolveConfig:
    return SolveConfig(**cfg.sample_settings(), problem=cfg.problem, model=cfg.model, mode=cfg.mode, base_url=cfg.base_url)


def sample_task(cfg: SearchConfig, state: State, k: int) -> Task:
    solve = _solve_config(cfg)
    best = state.best
    if best is not None and refines(k, cfg.refine_fraction):
        source = (state.root / "verify" / f"sample_{best.k}" / "solution.py").read_text()
        solve.refine = Refine(sample=best.k, source=source, feedback=feedback(cfg, state, best))
    if cfg.budget_usd is not None:  # one sample never spends more than what is left
        left = max(cfg.budget_usd - state.cost, 1e-9)
        solve.agent.cost_limit_usd = min(cfg.agent.cost_limit_usd or math.inf, left)
    return _task(state.root / "samples", k, solve, sample_job)


def verify_task(cfg: SearchConfig, state: State, k: int) -> Task:
    return _task(state.root / "verify", k, _solve_config(cfg), partial(verify_job, cfg.verify),
                 str(state.root / "samples" / f"sample_{k}" / "solution.py"))


IDENTITY = ("problem", "model", "mode", "device", "world_size", "size", "hardware")


def _open(cfg: SearchConfig, root: Path) -> None:
    """The search directory: the same search as before (if any), no half-finished folders."""
    old = _read_json(root / "search.json")
    if old is not None:
        diff = [k for k in IDENTITY if old.get("config", {}).get(k) != getattr(cfg, k)]
        if diff:
            was = ", ".join(f"{k}={old['config'].get(k)}" for k in diff)
            raise ConfigError(f"out: {root} holds another search ({was}); choose another --out")
    for p in [*root.glob("samples/.sample_*"), *root.glob("verify/.sample_*")]:
        shutil.rmtree(p, ignore_errors=True)
    (root / "samples").mkdir(parents=True, exist_ok=True)
    (root / "verify").mkdir(exist_ok=True)
    write_atomic(root / "search.json", json.dumps({"config": cfg.model_dump(mode="json"),
                                                   "updated": time.strftime("%Y-%m-%dT%H:%M:%S%z")}, indent=2) + "\n")


def run_search(cfg: SearchConfig, progress: bool = True) -> dict:
    """Runs (or resumes) the search; returns the leaderboard (as written to leaderboard.json)."""
    from rich.console import Console

    console = Console(stderr=True, quiet=not progress)
    root = Path(cfg.out or Path("runs") / "search" / cfg.problem)
    executor = make_executor(cfg, cfg.parallel)
    held = None
    try:
        held = lock(root)
        _open(cfg, root)
        state = State(root)
        console.print(f"[bold]search[/] {cfg.problem} with {cfg.model} ({cfg.mode}), {cfg.parallel} at once on "
                      f"{cfg.executor}/{cfg.device}: {len(state.entries)} samples finished before -> {root}")
        stopped = None

        def next_task(running: list[Task]) -> Task | None:
            nonlocal stopped
            verifying = {t.sample for t in running if _is_verify(t)}
            todo = sorted((e for e in state.entries.values() if state.needs_verify(e) and e.k not in verifying),
                          key=lambda e: e.screen_ms)
            if todo:
                return verify_task(cfg, state, todo[0].k)
            samples = [t.sample for t in running if not _is_verify(t)]
            stopped = stop_reason(cfg, state, len(samples), verifying)
            if stopped:
                return None
            k = next(i for i in range(len(state.entries) + len(running) + 1) if i not in state.entries and i not in samples)
            return sample_task(cfg, state, k)

        def done(task: Task, result: SolveResult) -> None:
            if _is_verify(task):
                finish(task, result)
                state.attach(task.sample, Path(task.dir))
            else:
                refined = task.solve.refine.sample if task.solve.refine else None
                Path(task.tmp).mkdir(parents=True, exist_ok=True)
                write_atomic(Path(task.tmp) / "lineage.json", json.dumps({"sample": task.sample, "refined": refined}) + "\n")
                finish(task, result)
                state.entries[task.sample] = Entry(task.sample, result, refined)
            console.print(event_line("verify" if _is_verify(task) else "sample", state.entries[task.sample], state))
            write_outputs(cfg, state, None)

        run_tasks(executor, cfg.parallel, next_task, done)
        board = write_outputs(cfg, state, stopped)
        console.print(f"stopped: {stopped}")
        return board
    finally:
        executor.close()
        if held is not None:
            held.close()


def _is_verify(task: Task) -> bool:
    return isinstance(task.job, partial) and task.job.func is verify_job


def event_line(kind: str, e: Entry, state: State) -> str:
    r = e.result
    if kind == "sample":
        head = f"sample {e.k}" + (f" (refines {e.parent})" if e.parent is not None else " (from scratch)")
        if e.screen is None:
            why = r.check.status if r.check else r.status
            return f"{head}: [red]{why}[/] {r.message[:120]}  ${r.cost_usd:.4f}"
        p = e.screen.perf
        return f"{head}: [green]correct[/], {p.candidate.median_ms:.4g} ms (reference {p.reference.median_ms:.4g} ms)  ${r.cost_usd:.4f}"
    if not e.verified:
        return f"re-check of sample {e.k}: [red]failed[/]: " + "; ".join(f"{k} {c.status}" for k, c in (e.verify or {}).items())
    d, large = e.verify["default"].perf, e.verify["large"].perf
    crown = "  [bold green]best so far[/]" if state.best is e else ""
    return (f"re-check of sample {e.k}: {d.candidate.median_ms:.4g} ms (screen {e.screen_ms:.4g} ms, reference "
            f"{d.reference.median_ms:.4g} ms), at the larger size {large.candidate.median_ms:.4g} ms{crown}")


# --- outputs: derived from the state, rewritten atomically -----------------------------------------------


def leaderboard(cfg: SearchConfig, state: State, stopped: str | None) -> dict:
    best, better = state.best, state.improvements()
    large = cfg.size * cfg.verify.size_factor
    rows = []
    ranked = state.ranked()
    for e in [*ranked, *sorted((e for e in state.entries.values() if e.screen is None), key=lambda e: e.k)]:
        r = e.result
        rows.append({
            "rank": ranked.index(e) + 1 if e in ranked and e.time_ms is not None else None,
            "sample": e.k, "refined": e.parent, "status": r.status,
            "check": r.check.status if r.check else None, "message": (r.check.message if r.check and not r.correct else r.message)[:300],
            "time_ms": e.time_ms, "screen": measured(e.screen, cfg.size),
            "verify": None if e.verify is None else ("verified" if e.verified else "failed"),
            "verified": None if not e.verify else {
                name: measured(c, cfg.size if name == "default" else large) or {"status": c.status, "message": c.message[:300]}
                for name, c in e.verify.items()},
            "improved": e.k in better, "best": e is best, "cost_usd": r.cost_usd, "steps": r.steps, "wall_s": r.wall_s,
        })
    return {"problem": cfg.problem, "model": cfg.model, "mode": cfg.mode, "device": cfg.device,
            "world_size": cfg.world_size, "size": cfg.size, "large_size": large, "hardware": cfg.hardware,
            "verify": cfg.verify.model_dump(), "samples": len(state.entries), "cost_usd": state.cost,
            "best": best.k if best else None, "stopped": stopped, "entries": rows}


def table(board: dict):
    """The leaderboard as a rich table: times are medians in ms per call, the reference's (timed
    in the same run) after the slash."""
    from rich.table import Table

    t = Table(title=f"{board['problem']} ({board['device']} x{board['world_size']}): {board['samples']} samples, "
                    f"${board['cost_usd']:.4f}; ms per call, candidate / reference in the same run")
    for col in ("rank", "sample", "refined", "screen", f"re-check, size {board['size']:g}",
                f"size {board['large_size']:g}", "speedup", "roofline", "cost"):
        t.add_column(col, justify="left" if col == "refined" else "right", no_wrap=True)

    def ms(m):
        if not m:
            return ""
        return f"{m['ms']:.4g} / {m['reference_ms']:.4g}" if "ms" in m else f"[red]{m['status']}[/]"

    for row in board["entries"]:
        v = row["verified"] or {}
        d = v.get("default") if "ms" in v.get("default", {}) else None
        rank = "[bold green]best[/]" if row["best"] else str(row["rank"] or "")
        screen = ms(row["screen"]) or f"[red]{row['check'] or row['status']}[/]"
        t.add_row(rank, str(row["sample"]), "" if row["refined"] is None else f"from {row['refined']}", screen,
                  ms(v.get("default")) or ("not needed" if row["screen"] else ""), ms(v.get("large")),
                  f"{d['speedup']:.2f}x" if d else "",
                  f"{d['roofline_fraction']:.0%}" if d and d["roofline_fraction"] is not None else "",
                  f"${row['cost_usd']:.4f}")
    return t


def plot(cfg: SearchConfig, state: State, path: Path) -> None:
    """Best verified time against samples and against cost (a kernel counts from its sample on)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ks = sorted(state.entries)
    cost, spent, best, low = [], 0.0, [], math.inf
    for k in ks:
        e = state.entries[k]
        spent += e.result.cost_usd
        low = min(low, e.verified_ms) if e.verified else low
        cost.append(spent)
        best.append(low if low < math.inf else math.nan)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), constrained_layout=True)
    for ax, xs, label in ((axes[0], list(range(1, len(ks) + 1)), "samples (in the order they started)"), (axes[1], cost, "cost (USD)")):
        ax.plot(xs, best, drawstyle="steps-post", marker="o", ms=4, label="best verified kernel")
        screened = [(x, state.entries[k].screen_ms) for x, k in zip(xs, ks) if state.entries[k].screen_ms is not None]
        if screened:
            ax.scatter(*zip(*screened), s=14, color="grey", label="each correct sample (screen)", zorder=3)
        rechecked = [(x, state.entries[k].verified_ms) for x, k in zip(xs, ks) if state.entries[k].verified]
        if rechecked:
            ax.scatter(*zip(*rechecked), s=30, marker="x", color="black", label="its re-check", zorder=3)
        if state.best is not None:
            ax.axhline(state.best.verify["default"].perf.reference.median_ms, color="red", ls="--", lw=1,
                       label="reference (best's re-check)")
        ax.set_xlabel(label)
        ax.set_ylabel(f"ms per call (median), size {cfg.size:g}")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"{cfg.problem}: {cfg.model} ({cfg.mode}), {cfg.device} x{cfg.world_size}")
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp, dpi=100)
    plt.close(fig)
    tmp.replace(path)


def write_outputs(cfg: SearchConfig, state: State, stopped: str | None) -> dict:
    from rich.console import Console

    root = state.root
    board = leaderboard(cfg, state, stopped)
    best = state.best
    if best is not None:
        (root / "best").mkdir(exist_ok=True)
        write_atomic(root / "best" / "solution.py", (root / "verify" / f"sample_{best.k}" / "solution.py").read_text())
        write_atomic(root / "best" / "result.json", json.dumps({
            "sample": best.k, "refined": best.parent, "problem": cfg.problem, "model": cfg.model,
            "screen": best.screen.model_dump(mode="json"),
            "verified": {k: c.model_dump(mode="json") for k, c in best.verify.items()},
            "sizes": {"default": cfg.size, "large": cfg.size * cfg.verify.size_factor}}, indent=2) + "\n")
    write_atomic(root / "leaderboard.json", json.dumps(board, indent=2) + "\n")
    console = Console(record=True, width=140, file=open("/dev/null", "w"))
    console.print(table(board))
    write_atomic(root / "leaderboard.txt", console.export_text())
    if state.entries:
        plot(cfg, state, root / "progress.png")
    return board


# --- the command ---------------------------------------------------------------------------------------------


def search(
    problem: Optional[str] = typer.Option(None, "--problem", help="Problem id (pkagent problems list)."),
    model: Optional[str] = typer.Option(None, "--model", help="openai:M, anthropic:M, google:M, openai-compatible:M or replay:PATH."),
    config: Optional[str] = typer.Option(None, "--config", help="A search YAML file, or the name of one under configs/search/."),
    parallel: Optional[int] = typer.Option(None, "--parallel", help="Samples at once (default 2)."),
    budget_usd: Optional[float] = typer.Option(None, "--budget-usd", help="No new sample once this much is spent."),
    max_samples: Optional[int] = typer.Option(None, "--max-samples", help="Samples in all (default 20)."),
    target_roofline: Optional[float] = typer.Option(None, "--target-roofline", help="Stop when the best reaches this fraction of the roofline (CUDA)."),
    target_speedup: Optional[float] = typer.Option(None, "--target-speedup", help="Stop when the best is this many times faster than the reference."),
    refine_fraction: Optional[float] = typer.Option(None, "--refine-fraction", help="Share of samples that start from the best kernel (default 0.5)."),
    patience: Optional[int] = typer.Option(None, "--patience", help="Stop when none of the last K samples improved the best."),
    mode: Optional[str] = typer.Option(None, "--mode", help="agent (default) or zero-shot."),
    device: Optional[str] = typer.Option(None, "--device", help="cuda (default) or cpu (gloo)."),
    world_size: Optional[int] = typer.Option(None, "--world-size", help="Ranks (default 2)."),
    out: Optional[str] = typer.Option(None, "--out", help="The search directory (default runs/search/PROBLEM); rerun to resume."),
    executor: Optional[str] = typer.Option(None, "--executor", help="local (default) or ray."),
    base_url: Optional[str] = typer.Option(None, "--base-url", help="API base URL of the model."),
    overrides: Optional[List[str]] = typer.Argument(None, metavar="[KEY=VALUE]...",
                                                    help="Config overrides, e.g. size=0.5 verify.trials=30 agent.step_limit=30."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress lines."),
) -> None:
    """Search for the fastest correct kernel of one problem: agents in parallel, a shared
    leaderboard, every winner re-checked; writes OUT/best/solution.py. Rerun to resume."""
    from rich.console import Console

    cfg = load_search(config, list(overrides or []), problem=problem, model=model, parallel=parallel,
                      budget_usd=budget_usd, max_samples=max_samples, target_roofline=target_roofline,
                      target_speedup=target_speedup, refine_fraction=refine_fraction, patience=patience, mode=mode,
                      device=device, world_size=world_size, out=out, executor=executor, base_url=base_url)
    board = run_search(cfg, progress=not quiet)
    Console(width=shutil.get_terminal_size((140, 24)).columns).print(table(board))
    root = Path(cfg.out or Path("runs") / "search" / cfg.problem)
    if board["best"] is None:
        typer.echo(f"no kernel passed its re-check ({board['samples']} samples, ${board['cost_usd']:.4f}); see {root}")
        raise typer.Exit(1)
    typer.echo(f"best: {root / 'best' / 'solution.py'} (sample {board['best']}); {board['samples']} samples, "
               f"${board['cost_usd']:.4f}; stopped on {board['stopped']}")
