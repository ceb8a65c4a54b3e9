"""`pkagent run CONFIG [key=value ...]`: a pass@k experiment, every problem x model x mode x sample.

    plan(cfg)       the config checked against the suite and the model specs (ConfigError, one
                    line, before anything runs), then one Task per sample
    run_experiment  skips finished samples, runs the rest `llm_concurrency` at a time on the
                    executor (experiments/executors.py), GPUs through the GpuPool, a live progress line;
                    stops starting samples once the run has spent cost_limit_usd

The run directory (RUN_DIR/NAME):

    experiment.json                              the config, the problems with their categories
    <model>/<problem>/<mode>/sample_<k>/         one finished sample: result.json (a SolveResult),
                                                 solution.py, transcript.jsonl (model samples)

A sample runs in a hidden sibling folder (.sample_<k>.<id>.tmp) that is renamed to sample_<k>
when it ends, so a kill -9 loses only the samples in flight and leaves no half-written sample;
every file the runner writes itself goes through a temporary file and os.replace. Rerunning the
same command skips the samples that exist. `--redo failed` reruns the samples that ended in an
error of the model API or of the harness (not those scored incorrect: rerunning those would
bias pass@k); `--redo all` reruns everything.

Existing generations: a model `folder:PATH` scores the files of PATH instead of asking a model,
named as ParallelKernelBench names its solutions: `{problem}_{backend}.py` for sample 0 and
`{problem}_{backend}_sample{k}.py`, or `{problem}_{backend}.py` in the sibling folder
`PATH_sample{k}/`, for sample k (`{problem}` is our problem id, or the `{id}_{name}` stem of a
ParallelKernelBench problem; `{backend}` one word: cuda, triton ...). When PATH has a subfolder
named after a mode (PATH/zero-shot/, PATH/agent/), that mode's files are read from it. A sample
without a file is recorded as `no_candidate`, a failure.

ParallelKernelBench problems (`pkb:PATH`): each model's generations are also copied, as they
finish, into that benchmark's layout under RUN_DIR/NAME/pkb_solutions/<mode>/
(eval/suites.py: solutions_<backend>_<precision>_<hardware>_<provider>_<model>[_sample<k>]/),
where its own harness can re-score them and `folder:` reads them back.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from agent.solve import SolveConfig, SolveResult
from agent.trusted import machine_pool
from configs import ConfigError, ExperimentConfig, load_hardware
from configs.files import write_atomic
from experiments.executors import FOLDER_PREFIX, Executor, Task, run_tasks

if TYPE_CHECKING:
    from experiments.search import SearchConfig

R = TypeVar("R", bound=SolveResult)
HARNESS_ERRORS = ("error", "model_error")  # what --redo failed reruns


# --- the plan ---------------------------------------------------------------------------------------


@dataclass
class Problem:
    ref: str  # what the checker takes: `all_reduce` or `pkb:/abs/path::1_all_reduce_sum`
    slug: str  # its folder in the run: the problem id
    category: str


def resolve_problems(entries: list[str], world_size: int) -> list[Problem]:
    """Problem ids, categories, `all`, `pkb:PATH` and `pkb:PATH::ID`, in the config's order."""
    from eval.problem import CATEGORIES, ProblemError, all_problems, load_problem
    from eval.suites import PKB_PREFIX, load, qualify, select, split

    out: dict[str, Problem] = {}
    for entry in entries:
        try:
            if entry.startswith(PKB_PREFIX):  # pkb:PATH, pkb:PATH::ID, ::1,3, ::1-8 (read as text, not imported)
                root, spec = split(entry)
                refs = [qualify(stem, f"{PKB_PREFIX}{root}") for stem in select(root, spec)]
                probs = [load(r) for r in refs]
            elif entry == "all" or entry in CATEGORIES:
                probs = all_problems(None if entry == "all" else entry)
                probs = [p for p in probs if world_size in p.meta.world_sizes]
                refs = [p.id for p in probs]
            else:
                probs, refs = [load_problem(entry)], [entry]
        except ProblemError as e:
            raise ConfigError(f"problems: {entry!r}: {e}") from None
        for ref, p in zip(refs, probs):
            if world_size not in p.meta.world_sizes:
                raise ConfigError(
                    f"problems: {p.id} supports world sizes {list(p.meta.world_sizes)}, not world_size={world_size}"
                )
            out.setdefault(p.id, Problem(ref, p.id, p.meta.category))
    if not out:
        raise ConfigError(f"problems: {entries} selects no problem at world_size={world_size}")
    return list(out.values())


def model_slug(spec: str) -> str:
    """The model's folder in the run: the spec made safe for a path (paths shortened, with a hash)."""
    provider, _, name = spec.partition(":")
    if "/" in name or len(spec) > 60:
        name = Path(name.rstrip("/")).name[:40] + "-" + hashlib.sha1(spec.encode()).hexdigest()[:6]
    return re.sub(r"[^A-Za-z0-9._-]+", "_", f"{provider}_{name}").strip("_")


def generation_files(folder: Path, problem: str) -> dict[int, Path]:
    """{sample: file} of `problem` in a folder of existing generations (naming: module docstring)."""
    from eval.suites import generation_files as found_in

    found = found_in(folder, problem)
    for k, files in found.items():
        if len(files) > 1:
            raise ConfigError(
                f"{folder}: sample {k} of {problem} has {len(files)} files ({', '.join(f.name for f in files)}); "
                "keep one per problem and sample"
            )
    return {k: files[0] for k, files in found.items()}


def check_models(cfg: ExperimentConfig, problems: list[Problem]) -> None:
    """Every model spec usable before anything runs: provider, API key, base URL, folder."""
    from agent.models import get_model

    for spec in cfg.models:
        if spec.startswith(FOLDER_PREFIX):
            if not Path(spec[len(FOLDER_PREFIX) :]).is_dir():
                raise ConfigError(f"models: {spec}: no such folder of existing generations")
            continue
        get_model(spec, cfg.agent, base_url=cfg.base_urls.get(spec))


def plan(cfg: ExperimentConfig) -> tuple[Path, list[Problem], list[Task]]:
    """The run directory, the problems, and every sample of the experiment, ordered sample index
    first, so that a run stopped early (cost limit) has sample 0 of every problem."""
    problems = resolve_problems(cfg.problems, cfg.world_size)
    check_models(cfg, problems)
    load_hardware(cfg.hardware)  # an unknown profile fails here, not in every sample
    root = Path(cfg.run_dir) / cfg.name
    files: dict[tuple[str, str, str], dict[int, Path]] = {}
    for spec in cfg.models:
        if spec.startswith(FOLDER_PREFIX):
            folder = Path(spec[len(FOLDER_PREFIX) :])
            for mode in cfg.modes:
                where = folder / mode if (folder / mode).is_dir() else folder
                for p in problems:
                    files[(spec, mode, p.slug)] = generation_files(where, p.slug)
    tasks = []
    for k in range(cfg.samples):
        for spec in cfg.models:
            for mode in cfg.modes:
                for p in problems:
                    d = root / model_slug(spec) / p.slug / mode / f"sample_{k}"
                    cand = files.get((spec, mode, p.slug), {}).get(k)
                    tasks.append(
                        Task(
                            solve=SolveConfig(
                                **cfg.sample_settings(), problem=p.ref, model=spec, mode=mode, base_url=cfg.base_urls.get(spec)
                            ),
                            sample=k,
                            dir=str(d),
                            tmp=str(d.parent / f".{d.name}.{uuid.uuid4().hex[:8]}.tmp"),
                            candidate=str(cand.resolve()) if cand else None,
                        )
                    )
    return root, problems, tasks


# --- the run directory --------------------------------------------------------------------------------


def read_result(sample_dir: Path, kind: type[R] = SolveResult) -> R | None:
    """A finished sample's result (a SolveResult, or the `kind` its job writes), or None."""
    try:
        return kind.model_validate_json((sample_dir / "result.json").read_text())
    except (OSError, ValueError):
        return None


def finish(task: Task, result: SolveResult) -> None:
    """Make the sample final: result.json in its folder, synced; then one rename to sample_<k>.
    A redone sample replaces the old one: old -> .old, new -> sample_<k>, .old removed."""
    tmp, final = Path(task.tmp), Path(task.dir)
    tmp.mkdir(parents=True, exist_ok=True)
    result.out_dir = str(final)
    write_atomic(tmp / "result.json", result.model_dump_json(indent=2) + "\n")
    old = final.with_name(f".{final.name}.{uuid.uuid4().hex[:8]}.old")
    if final.exists():
        os.replace(final, old)
    os.replace(tmp, final)
    shutil.rmtree(old, ignore_errors=True)
    s = task.solve
    if s.problem.startswith("pkb:") and not s.model.startswith(FOLDER_PREFIX) and (final / "solution.py").is_file():
        from agent.solve import export

        export(s, final.parents[1].name, final / "solution.py", final.parents[3] / "pkb_solutions" / s.mode, task.sample)


def lock(root: Path):
    """One runner per run directory at a time (a second would clean up the first's samples)."""
    root.mkdir(parents=True, exist_ok=True)
    f = open(root / ".lock", "w")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise ConfigError(f"{root}: another pkagent run is writing to this run directory") from None
    return f


def clean_leftovers(root: Path) -> int:
    """Folders of samples that were in flight when a run died: removed (they are rerun)."""
    stale = [p for p in root.glob("*/*/*/.sample_*") if p.is_dir()]
    for p in stale:
        shutil.rmtree(p, ignore_errors=True)
    return len(stale)


# --- running --------------------------------------------------------------------------------------------


@dataclass
class Tally:
    """What the progress line shows; finished samples of earlier runs included."""

    total: int
    done: int = 0
    running: int = 0
    passed: int = 0
    failed: int = 0  # finished, not correct
    errors: int = 0  # of those, errors of the model API or the harness
    tokens_in: int = 0
    tokens_out: int = 0
    cost: float = 0.0
    skipped: int = 0  # not started: cost limit

    def add(self, r: SolveResult) -> None:
        self.done += 1
        self.passed += r.correct
        self.failed += not r.correct
        self.errors += r.status in HARNESS_ERRORS
        self.tokens_in += r.usage.prompt_tokens
        self.tokens_out += r.usage.output_tokens
        self.cost += r.cost_usd

    def line(self) -> str:
        return (
            f"done {self.done}/{self.total}  running {self.running}  [green]passed {self.passed}[/]  "
            f"[red]failed {self.failed}[/] ({self.errors} errors)  tokens {self.tokens_in:,} in / {self.tokens_out:,} out  "
            f"${self.cost:.2f}"
        )


def make_executor(cfg: ExperimentConfig | SearchConfig, slots: int) -> Executor:
    """Where the samples run (cfg.executor), `slots` at once; locally, on GPUs of the machine's pool (cfg.gpus)."""
    from experiments.executors import LocalExecutor, RayExecutor

    if cfg.executor == "ray":
        return RayExecutor(cfg.ray_address, cfg.device, cfg.world_size)
    pool = machine_pool(cfg.world_size, cfg.gpus, "device cuda", "device=cpu") if cfg.device == "cuda" else None
    return LocalExecutor(slots, pool)


def execute(
    tasks: list[Task],
    executor: Executor | None,
    slots: int,
    tally: Tally,
    cost_limit: float | None,
    show: Callable[[], None] = lambda: None,
) -> Tally:
    """Runs `tasks`, at most `slots` at once, recording each as it ends; no task starts once
    tally.cost has reached cost_limit (the running ones finish)."""
    queue = deque(tasks)

    def next_task(running: list[Task]) -> Task | None:
        if queue and cost_limit is not None and tally.cost >= cost_limit:
            tally.skipped = len(queue)
            queue.clear()
        return queue.popleft() if queue else None

    def done(task: Task, result: SolveResult) -> None:
        finish(task, result)
        tally.add(result)

    def update(running: int) -> None:
        tally.running = running
        show()

    try:
        run_tasks(executor, slots, next_task, done, update)
    finally:
        if executor is not None:
            executor.close()
    return tally


def run_experiment(cfg: ExperimentConfig, redo: str | None = None, progress: bool = True) -> Tally:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    if redo not in (None, "failed", "all"):
        raise ConfigError(f"--redo {redo!r}: expected failed or all")
    root, problems, tasks = plan(cfg)
    held = lock(root)
    try:
        clean_leftovers(root)
        write_atomic(
            root / "experiment.json",
            json.dumps(
                {
                    "name": cfg.name,
                    "config": cfg.model_dump(mode="json"),
                    "problems": {p.slug: {"ref": p.ref, "category": p.category} for p in problems},
                    "models": {model_slug(m): m for m in cfg.models},
                    "updated": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                },
                indent=2,
            )
            + "\n",
        )
        tally = Tally(total=len(tasks))
        todo = []
        for task in tasks:
            old = read_result(Path(task.dir))
            if old is not None and not (redo == "all" or (redo == "failed" and old.status in HARNESS_ERRORS)):
                tally.add(old)
            else:
                todo.append(task)
        console = Console(stderr=True)
        if progress:
            console.print(
                f"[bold]{cfg.name}[/]: {len(tasks)} samples ({len(problems)} problems x {len(cfg.models)} models x "
                f"{len(cfg.modes)} modes x {cfg.samples}), {len(tasks) - len(todo)} finished before, "
                f"{len(todo)} to run; {cfg.executor} executor, {cfg.llm_concurrency} at once -> {root}"
            )
        live = progress and console.is_terminal  # in a pipe or a log: one whole line per finished sample instead
        bar = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[line]}"),
            TimeElapsedColumn(),
            console=console,
            disable=not live,
        )
        with bar:
            row = bar.add_task(cfg.name, total=tally.total, completed=tally.done, line=tally.line())
            shown = [tally.done]

            def show() -> None:
                bar.update(row, completed=tally.done, line=tally.line())
                if progress and not live and tally.done != shown[0]:
                    shown[0] = tally.done
                    console.print(tally.line(), soft_wrap=True)

            execute(
                todo,
                make_executor(cfg, cfg.llm_concurrency) if todo else None,
                cfg.llm_concurrency,
                tally,
                cfg.cost_limit_usd,
                show,
            )
        if progress and tally.skipped:
            console.print(
                f"[yellow]cost limit ${cfg.cost_limit_usd:.2f} reached (${tally.cost:.2f} spent): "
                f"{tally.skipped} samples not started; rerun with a higher cost_limit_usd to finish them[/]"
            )
        return tally
    finally:
        held.close()
