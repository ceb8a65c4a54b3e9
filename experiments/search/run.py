"""Running (or resuming) a search in its directory: jobs on the executor until a stop reason."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

from agent.solve import SolveResult
from configs import ConfigError
from configs.files import write_atomic
from experiments.executors import Task, run_tasks
from experiments.experiment import finish, lock, make_executor
from experiments.search.config import SearchConfig
from experiments.search.jobs import is_verify, sample_task, verify_task
from experiments.search.outputs import event_line, write_outputs
from experiments.search.policy import stop_reason
from experiments.search.state import Entry, State, read_json

IDENTITY = ("problem", "model", "mode", "device", "world_size", "size", "hardware")


def _open(cfg: SearchConfig, root: Path) -> None:
    """The search directory: the same search as before (if any), no half-finished folders."""
    old = read_json(root / "search.json")
    if old is not None:
        diff = [k for k in IDENTITY if old.get("config", {}).get(k) != getattr(cfg, k)]
        if diff:
            was = ", ".join(f"{k}={old['config'].get(k)}" for k in diff)
            raise ConfigError(f"out: {root} holds another search ({was}); choose another --out")
    for p in [*root.glob("samples/.sample_*"), *root.glob("verify/.sample_*")]:
        shutil.rmtree(p, ignore_errors=True)
    (root / "samples").mkdir(parents=True, exist_ok=True)
    (root / "verify").mkdir(exist_ok=True)
    write_atomic(
        root / "search.json",
        json.dumps({"config": cfg.model_dump(mode="json"), "updated": time.strftime("%Y-%m-%dT%H:%M:%S%z")}, indent=2) + "\n",
    )


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
        console.print(
            f"[bold]search[/] {cfg.problem} with {cfg.model} ({cfg.mode}), {cfg.parallel} at once on "
            f"{cfg.executor}/{cfg.device}: {len(state.entries)} samples finished before -> {root}"
        )
        stopped = None

        def next_task(running: list[Task]) -> Task | None:
            nonlocal stopped
            verifying = {t.sample for t in running if is_verify(t)}
            todo = sorted(
                (e for e in state.entries.values() if state.needs_verify(e) and e.k not in verifying), key=lambda e: e.screen_ms
            )
            if todo:
                return verify_task(cfg, state, todo[0].k)
            samples = [t.sample for t in running if not is_verify(t)]
            stopped = stop_reason(cfg, state, len(samples), verifying)
            if stopped:
                return None
            k = next(i for i in range(len(state.entries) + len(running) + 1) if i not in state.entries and i not in samples)
            return sample_task(cfg, state, k)

        def done(task: Task, result: SolveResult) -> None:
            if is_verify(task):
                finish(task, result)
                state.attach(task.sample, Path(task.dir))
            else:
                refined = task.solve.refine.sample if task.solve.refine else None
                Path(task.tmp).mkdir(parents=True, exist_ok=True)
                write_atomic(Path(task.tmp) / "lineage.json", json.dumps({"sample": task.sample, "refined": refined}) + "\n")
                finish(task, result)
                state.entries[task.sample] = Entry(task.sample, result, refined)
            console.print(event_line("verify" if is_verify(task) else "sample", state.entries[task.sample], state))
            write_outputs(cfg, state, None)

        run_tasks(executor, cfg.parallel, next_task, done)
        board = write_outputs(cfg, state, stopped)
        console.print(f"stopped: {stopped}")
        return board
    finally:
        executor.close()
        if held is not None:
            held.close()
