"""Where the samples of an experiment run: `local` (threads here, each sample in a child process)
or `ray` (one Ray task per sample, on any node of a cluster).

A sample is a Task: a SolveConfig plus where to write. `run_sample(task, gpus)` does the work
wherever it runs: `solve()` for a model, the checker alone for an existing generation
(folder:PATH). It writes into task.tmp; the runner (experiments/experiment.py) then moves that folder
to task.dir in one rename, so a sample directory exists only once its sample is finished.

GPUs. Local: the GpuPool lives in the runner. A sample's child process asks the runner for
GPUs over a pipe at the moment it needs them (the agent's sandbox, then the trusted check) and
gives them back right after (solve()'s `gpus` argument), so a sample waiting on its model holds
no GPU, and the model latency of some samples overlaps the GPU work of others. Ray: a task asks
Ray for world_size GPUs (one task lands on one node, so its GPUs are on one node) and holds them
for the sample.
"""

from __future__ import annotations

import os
import shutil
import time
import traceback
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from agent.solve import SolveConfig, SolveResult, solve
from agent.trusted import Gpus, check_kernel
from configs.files import write_atomic

FOLDER_PREFIX = "folder:"


@dataclass(frozen=True)
class Task:
    solve: SolveConfig  # the sample's problem, model, mode, device, limits ...
    sample: int
    dir: str  # RUN/<model>/<problem>/<mode>/sample_<k>: exists only when the sample is finished
    tmp: str  # where the sample is written while it runs
    candidate: str | None = None  # folder:PATH models: the file to score (None: the folder has none)
    job: Callable[[Task, Gpus | None], SolveResult] | None = None  # run instead of the sample (pkagent search)


# --- one sample, wherever it runs ----------------------------------------------------------------


def run_sample(task: Task, gpus: Gpus | None) -> SolveResult:
    """The sample's SolveResult; writes transcript (models), solution.py and result.json into task.tmp."""
    if task.job is not None:
        return task.job(task, gpus)
    cfg = task.solve
    out = Path(task.tmp)
    if cfg.model.startswith(FOLDER_PREFIX):
        return score_generation(cfg, task, out, gpus)
    return solve(cfg, out, gpus if cfg.device == "cuda" else None)


def score_generation(cfg: SolveConfig, task: Task, out: Path, gpus: Gpus | None) -> SolveResult:
    """An existing candidate, scored as solve() scores a model's: copied to solution.py, checked."""
    t0 = time.monotonic()
    out.mkdir(parents=True, exist_ok=True)
    result = SolveResult(
        problem=cfg.problem,
        model=cfg.model,
        mode=cfg.mode,
        status="completed",
        out_dir=str(out),
        message=f"existing generation {task.candidate}",
    )
    if task.candidate is None:
        result.status, result.message = "no_candidate", f"{cfg.model}: no file for sample {task.sample} of this problem"
    else:
        shutil.copyfile(task.candidate, out / "solution.py")
        result.check = check_kernel(cfg, out / "solution.py", gpus)
        result.correct = result.check.ok
    result.wall_s = round(time.monotonic() - t0, 3)
    write_atomic(out / "result.json", result.model_dump_json(indent=2) + "\n")
    return result


def failed_result(task: Task, message: str) -> SolveResult:
    """The record of a sample whose process died or raised: status error, nothing scored."""
    s = task.solve
    return SolveResult(problem=s.problem, model=s.model, mode=s.mode, status="error", message=message, out_dir=task.tmp)


class Executor(Protocol):
    """Runs tasks somewhere: LocalExecutor or RayExecutor."""

    def submit(self, task: Task) -> Any: ...

    def wait(self, handles: list[Any], timeout: float) -> list[tuple[Any, Any]]: ...

    def close(self) -> None: ...


def run_tasks(
    executor: Executor,
    slots: int,
    next_task: Callable[[list[Task]], Task | None],
    done: Callable[[Task, SolveResult], None],
    show: Callable[[int], None] = lambda running: None,
) -> None:
    """The submit/wait loop of a run: while fewer than `slots` tasks run, submits next_task(the
    running tasks) until it returns None; calls done(task, result) for each task as it ends (a
    task whose worker raised or died gets failed_result); returns once nothing runs and
    next_task has nothing more. show(running) is called after every change."""
    running: dict[Any, Task] = {}
    while True:
        while len(running) < slots:
            task = next_task(list(running.values()))
            if task is None:
                break
            running[executor.submit(task)] = task
        show(len(running))
        if not running:
            return
        for handle, outcome in executor.wait(list(running), timeout=0.5):
            task = running.pop(handle)
            result = (
                outcome if not isinstance(outcome, BaseException) else failed_result(task, f"{type(outcome).__name__}: {outcome}")
            )
            done(task, result)
        show(len(running))


# --- local: threads here, a child process per sample ------------------------------------------------


class _PipeGpus:
    """In the child: GPUs from the runner's pool, over the pipe."""

    def __init__(self, conn):
        self.conn = conn

    @contextmanager
    def acquire(self, n: int) -> Iterator[list[int]]:
        self.conn.send(("acquire", n))
        ids = self.conn.recv()
        try:
            yield ids
        finally:
            self.conn.send(("release", ids))


def _child(task: Task, conn) -> None:
    """The child process of one local sample: output to worker.log, dies with its parent."""
    import ctypes
    import signal

    try:
        ctypes.CDLL("libc.so.6").prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: a killed runner leaves no sample behind
    except OSError:
        pass
    if os.getppid() == 1:
        os._exit(1)
    Path(task.tmp).mkdir(parents=True, exist_ok=True)
    log = os.open(Path(task.tmp) / "worker.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    try:
        result = run_sample(task, _PipeGpus(conn))
        conn.send(("done", result.model_dump(mode="json")))
    except BaseException as e:  # noqa: BLE001 - reported to the runner, which records the sample as an error
        traceback.print_exc()
        conn.send(("failed", f"{type(e).__name__}: {e}"))


def run_in_child(task: Task, acquire: Callable[[int], AbstractContextManager[list[int]]] | None):
    """Runs one sample in a child process (spawned: no state shared with this one), serving
    its GPU requests from `acquire` (the runner's GpuPool.acquire); returns its SolveResult."""
    import multiprocessing as mp

    Path(task.tmp).mkdir(parents=True, exist_ok=True)  # in flight from now: a killed run leaves this folder behind
    ctx = mp.get_context("spawn")
    here, there = ctx.Pipe()
    proc = ctx.Process(target=_child, args=(task, there), daemon=True)
    proc.start()
    there.close()
    held: dict[tuple[int, ...], AbstractContextManager] = {}
    try:
        while True:
            try:
                kind, value = here.recv()
            except (EOFError, OSError):
                proc.join()
                return failed_result(
                    task,
                    f"the sample's process ended (exit code {proc.exitcode}) before its result; "
                    f"see {Path(task.dir) / 'worker.log'}",
                )
            if kind == "acquire":
                if acquire is None:
                    here.send([])
                    continue
                cm = acquire(value)
                ids = cm.__enter__()
                held[tuple(ids)] = cm
                here.send(ids)
            elif kind == "release":
                held.pop(tuple(value)).__exit__(None, None, None)
            elif kind == "done":
                proc.join()
                return SolveResult.model_validate(value)
            else:
                proc.join()
                return failed_result(task, value)
    finally:
        for cm in held.values():
            cm.__exit__(None, None, None)
        if proc.is_alive():
            proc.kill()
            proc.join()
        here.close()


class LocalExecutor:
    """`slots` samples at once in threads; GPUs from `pool` (None on CPU). `work(task, acquire)`
    runs one sample: run_in_child for real samples, a fake for the scheduler benchmark."""

    def __init__(self, slots: int, pool=None, work: Callable = run_in_child):
        self.pool, self.work = pool, work
        self._threads = ThreadPoolExecutor(max_workers=slots, thread_name_prefix="sample")

    def submit(self, task: Task) -> Future:
        return self._threads.submit(self.work, task, self.pool.acquire if self.pool is not None else None)

    def wait(self, handles: list[Future], timeout: float) -> list[tuple[Future, Any]]:
        done, _ = wait_futures(handles, timeout=timeout, return_when=FIRST_COMPLETED)
        return [(f, f.exception() or f.result()) for f in done]

    def close(self) -> None:
        self._threads.shutdown(wait=True, cancel_futures=True)


# --- ray: one task per sample ---------------------------------------------------------------------------


class _FixedGpus:
    """In a Ray task: the GPUs Ray gave it, for every use of the sample."""

    def __init__(self, ids: list[int]):
        self.ids = ids

    @contextmanager
    def acquire(self, n: int) -> Iterator[list[int]]:
        if n > len(self.ids):
            raise RuntimeError(f"the sample asked for {n} GPUs; Ray gave its task {len(self.ids)}")
        yield self.ids[:n]


def _ray_sample(task: Task):
    import ray

    Path(task.tmp).mkdir(parents=True, exist_ok=True)
    gpus = _FixedGpus([int(i) for i in ray.get_gpu_ids()])
    try:
        return run_sample(task, gpus)
    except Exception as e:  # noqa: BLE001 - recorded as the sample's error
        return failed_result(task, f"{type(e).__name__}: {e}")


class RayExecutor:
    """Samples as Ray tasks: world_size GPUs each on CUDA (one node), one CPU; one sample per
    worker process (max_calls=1), so no CUDA state outlives its sample. The run directory must be
    on a file system every node shares."""

    def __init__(self, address: str | None, device: str, world_size: int):
        import ray

        if not ray.is_initialized():
            ray.init(address=address, include_dashboard=False, log_to_driver=False)
        self._ray = ray
        self._remote = ray.remote(num_gpus=world_size if device == "cuda" else 0, num_cpus=1, max_calls=1)(_ray_sample)

    def submit(self, task: Task):
        return self._remote.remote(task)

    def wait(self, handles: list, timeout: float) -> list[tuple[Any, Any]]:
        ready, _ = self._ray.wait(handles, num_returns=1, timeout=timeout)
        out = []
        for ref in ready:
            try:
                out.append((ref, self._ray.get(ref)))
            except Exception as e:  # noqa: BLE001 - a worker that died: the sample's error
                out.append((ref, e))
        return out

    def close(self) -> None:
        pass
