"""The jobs of a search, run by the executors of `pkagent run` (in a child process or a Ray task):
one sample (solve(), then a timed check on CPU) and one re-check; and the tasks that carry them."""

from __future__ import annotations

import json
import math
import shutil
import time
import uuid
from collections.abc import Callable
from functools import partial
from pathlib import Path

from agent.solve import Refine, SolveConfig, SolveResult, solve
from agent.trusted import Gpus, check_kernel
from configs.files import write_atomic
from experiments.executors import Task
from experiments.search.config import SearchConfig, VerifyConfig
from experiments.search.policy import feedback, refines
from experiments.search.state import State, VerifyResult


def sample_job(task: Task, gpus: Gpus | None) -> SolveResult:
    """solve(), then on CPU a timed check of a correct candidate (solve() times on CUDA only)."""
    cfg = task.solve
    out = Path(task.tmp)
    result = solve(cfg, out, gpus if cfg.device == "cuda" else None)
    if result.correct and result.check.perf is None:
        screen = check_kernel(cfg, out / "solution.py", gpus, perf=True)
        result = result.model_copy(
            update=dict(
                check=screen, correct=screen.ok, message=result.message + "; timed by a second check (solve() times on CUDA only)"
            )
        )
        write_atomic(out / "result.json", result.model_dump_json(indent=2) + "\n")
    return result


def verify_job(v: VerifyConfig, task: Task, gpus: Gpus | None) -> VerifyResult:
    """The re-check of task.candidate: fresh inputs, many trials, at size and at the larger size."""
    cfg = task.solve
    out = Path(task.tmp)
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(task.candidate, out / "solution.py")
    t0 = time.monotonic()
    checks = {}
    for name, size in (("default", cfg.size), ("large", cfg.size * v.size_factor)):
        checks[name] = check_kernel(
            cfg, out / "solution.py", gpus, perf=True, trials=v.trials, batches=v.batches, size=size, seed=v.seed + task.sample
        )
        if not checks[name].ok:
            break
    write_atomic(out / "verify.json", json.dumps({k: c.model_dump(mode="json") for k, c in checks.items()}, indent=2) + "\n")
    ok = len(checks) == 2 and all(c.ok for c in checks.values())
    return VerifyResult(
        problem=cfg.problem,
        model=cfg.model,
        mode=cfg.mode,
        status="verified" if ok else "verify_failed",
        correct=ok,
        check=checks["default"],
        wall_s=round(time.monotonic() - t0, 3),
        out_dir=str(out),
        message="; ".join(f"{k}: {c.status}: {c.message}" for k, c in checks.items()),
    )


def _task(
    folder: Path, k: int, solve: SolveConfig, job: Callable[[Task, Gpus | None], SolveResult], candidate: str | None = None
) -> Task:
    d = folder / f"sample_{k}"
    return Task(
        solve=solve,
        sample=k,
        dir=str(d),
        tmp=str(folder / f".sample_{k}.{uuid.uuid4().hex[:8]}.tmp"),
        candidate=candidate,
        job=job,
    )


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
    return _task(
        state.root / "verify",
        k,
        _solve_config(cfg),
        partial(verify_job, cfg.verify),
        str(state.root / "samples" / f"sample_{k}" / "solution.py"),
    )


def is_verify(task: Task) -> bool:
    return isinstance(task.job, partial) and task.job.func is verify_job
