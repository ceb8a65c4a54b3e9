"""One sample: a problem, a model, a mode -> a run directory with transcript.jsonl, solution.py
and result.json.

agent:     the model works in a sandbox (agent/loop.py) until it submits or hits a limit;
zero-shot: one completion, whose python block becomes the candidate.
Either way the trusted checker (eval.check.check, outside the sandbox) scores a copy of the
candidate taken when the sample ends, so nothing the model does afterwards can change it.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from agent.loop import Agent, Ending, Outcome
from agent.models import Client, ModelError, Usage, get_model
from agent.transcript import Transcript
from agent.trusted import check_kernel, lease, machine_pool
from configs import ConfigError, SampleSettings, Strict, apply_overrides, validate
from configs.errors import OutputError
from configs.files import make_dir, write_atomic
from eval.result import CheckResult

PYTHON_BLOCK = re.compile(r"```(?:python|py)[ \t]*\n(.*?)```", re.DOTALL)


class Refine(Strict):
    """A kernel to start from (experiments/search.py): another sample's solution.py, what the checker
    measured for it, and its place on the search's leaderboard. Shown in the task prompt."""

    sample: int
    source: str
    feedback: str


class SolveConfig(SampleSettings):
    """One sample: `pkagent solve`'s options, and what the runner and the search give each of their samples."""

    problem: str = Field(description="a problem id, or pkb:PATH::ID for a ParallelKernelBench problem")
    model: str = Field(description="PROVIDER:MODEL, e.g. anthropic:claude-sonnet-4-6 or replay:PATH")
    mode: Literal["agent", "zero-shot"] = "agent"
    base_url: str | None = None
    refine: Refine | None = Field(default=None, description="start from this kernel (pkagent search)")


Status = Literal[Ending, "error", "no_candidate"]  # error: of the harness; no_candidate: an existing generation without a file


class SolveResult(BaseModel):
    """A sample's record, its result.json: how it ended, what it cost, and the trusted check."""

    problem: str
    model: str
    mode: str
    status: Status
    message: str = ""
    correct: bool = False
    steps: int = 0
    cost_usd: float = 0.0
    usage: Usage = Field(default_factory=Usage)
    wall_s: float = 0.0
    check: CheckResult | None = None
    out_dir: str = ""


def make_config(overrides: list[str] | None = None, **fields: Any) -> SolveConfig:
    """Command-line fields, then key=value overrides (`agent.step_limit=10`), validated."""
    data = {k: v for k, v in fields.items() if v is not None}
    return validate(SolveConfig, apply_overrides(data, overrides or []), "solve")


def extract_python(text: str) -> str | None:
    """The last fenced python block of a reply (the final version, when a model drafts twice)."""
    blocks = PYTHON_BLOCK.findall(text)
    return blocks[-1].strip() + "\n" if blocks and blocks[-1].strip() else None


def _zero_shot(model: Client, prompt: str, tr: Transcript, system: str | None = None) -> tuple[Outcome, bytes | None]:
    messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": prompt}]
    tr.write("prompt", messages=messages)
    try:
        reply = model.query(messages)
    except ModelError as e:
        return Outcome("context_length" if e.kind == "context_length" else "model_error", str(e)), None
    tr.write("response", step=1, reply=reply.model_dump(), total_cost_usd=reply.cost_usd)
    code = extract_python(reply.text)
    if code is None:
        tr.write("format_error", message="no ```python block in the reply", count=1)
        return Outcome("format_error", "the reply has no python block", 1, reply.cost_usd, reply.usage), None
    return Outcome("completed", "the reply's python block is the candidate", 1, reply.cost_usd, reply.usage), code.encode()


def _agent(
    cfg: SolveConfig, model: Client, system: str, task: str, tr: Transcript, work: Path, gpus: Any, files: dict[str, bytes]
) -> tuple[Outcome, bytes | None]:
    from sandbox import SandboxError, open_sandbox

    with lease(gpus if cfg.device == "cuda" else None, cfg.world_size) as ids, open_sandbox(cfg.sandbox, work, ids) as box:
        for name, data in files.items():
            box.put(name, data)
        agent = Agent(
            model, box, cfg.agent, tr, output_limit=cfg.sandbox.output_limit_chars, command_timeout=cfg.sandbox.command_timeout_s
        )
        outcome = agent.run(system, task)
        try:
            code = box.get("solution.py")
        except (OSError, SandboxError):
            code = None
    return outcome, code


def _zero_shot_prompt(cfg: SolveConfig, problem: Any, ctx: dict[str, Any]) -> tuple[str, str | None]:
    """(user prompt, system prompt or None): ours, or the user's prompt file (pkb.prompt_file)."""
    from prompts import prompt_from_file, render

    if not cfg.pkb.prompt_file:
        return render("zero_shot.j2", **ctx), None
    from eval.suites import is_pkb, solutions_dir_name

    checkout = Path(problem.path).parents[1] if is_pkb(problem) else None
    target = (
        f"{solutions_dir_name(cfg.model, cfg.pkb.backend, cfg.pkb.precision, cfg.hardware)}/{problem.id}_{cfg.pkb.backend}.py"
    )
    try:
        system, user = prompt_from_file(
            cfg.pkb.prompt_file,
            ctx,
            checkout=checkout,
            option=cfg.pkb.prompt_option,
            backend=cfg.pkb.backend,
            precision=cfg.pkb.precision,
            hardware=cfg.pkb.prompt_hardware,
            target=target,
        )
    except (OSError, ValueError, KeyError) as e:  # tomllib's and jinja2's errors are ValueErrors
        raise ConfigError(f"pkb.prompt_file {cfg.pkb.prompt_file}: {type(e).__name__}: {e}") from None
    return user, system


def pkb_files(problem: Any) -> dict[str, bytes]:
    """A ParallelKernelBench problem's files for the agent's work directory (prompts.PKB_COPY):
    its reference and the checkout's utils/ (the input generator), so that `pkagent check --suite
    pkb:pkb` works inside any sandbox. The trusted check reads the checkout itself."""
    from prompts import PKB_COPY

    path = Path(problem.path)
    files = {f"{PKB_COPY}/reference/{path.name}": path.read_bytes()}
    for p in sorted((path.parents[1] / "utils").glob("*.py")):
        if p.stat().st_size < 1 << 20:
            files[f"{PKB_COPY}/utils/{p.name}"] = p.read_bytes()
    return files


def export(cfg: SolveConfig, stem: str, solution: Path, base: Path, sample: int) -> Path:
    """A copy of `solution` in ParallelKernelBench's layout under `base` (eval.suites.solution_path)."""
    from eval.suites import solution_path, solutions_dir_name

    folder = solutions_dir_name(cfg.model, cfg.pkb.backend, cfg.pkb.precision, cfg.hardware)
    target = solution_path(base, folder, stem, sample, cfg.pkb.backend)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.write_bytes(solution.read_bytes())
    os.replace(tmp, target)
    return target


def solve(cfg: SolveConfig, out: Path, gpus: Any = None) -> SolveResult:
    """Run one sample into `out`. On CUDA, `gpus` is where GPUs come from: anything with
    `acquire(n)`, a context manager of GPU ids, like sandbox.GpuPool. The sandbox holds
    world_size of them while the agent works, and the trusted check while it runs (with
    CUDA_VISIBLE_DEVICES set to them). Without `gpus`, the sandbox leases from this machine's
    pool and the check runs on this process's visible GPUs."""
    from configs import load_hardware
    from eval.problem import ProblemError
    from eval.suites import is_pkb, load
    from prompts import render, task_context

    t0 = time.monotonic()
    try:
        problem = load(cfg.problem)
    except ProblemError as e:
        raise ConfigError(f"--problem: {e}") from None
    if cfg.world_size not in problem.meta.world_sizes:
        raise ConfigError(f"--world-size {cfg.world_size}: {problem.id} supports {list(problem.meta.world_sizes)}")
    hardware = load_hardware(cfg.hardware)
    model = get_model(cfg.model, cfg.agent, base_url=cfg.base_url)
    pool = machine_pool(cfg.world_size) if cfg.device == "cuda" and gpus is None else gpus
    actions = model.actions or cfg.agent.actions
    out = Path(out)
    if (out / "transcript.jsonl").exists():
        raise ConfigError(f"--out {out}: holds a transcript already; choose another directory")
    make_dir(out, "--out: cannot write")
    ctx = task_context(problem, hardware, world_size=cfg.world_size, device=cfg.device, size=cfg.size, actions=actions)
    ctx["refine"] = cfg.refine.model_dump() if cfg.refine else None
    result = SolveResult(problem=cfg.problem, model=cfg.model, mode=cfg.mode, status="error", out_dir=str(out))
    with Transcript(out / "transcript.jsonl") as tr:
        tr.write(
            "start",
            problem=cfg.problem,
            model=cfg.model,
            mode=cfg.mode,
            device=cfg.device,
            world_size=cfg.world_size,
            size=cfg.size,
            hardware=cfg.hardware,
            actions=actions,
            config=cfg.model_dump(),
            time=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        )
        if model.price is None and model.provider != "replay":
            tr.write("warning", message=f"no price for {model.model} in configs/models.yaml: cost counted as 0")
        try:
            if cfg.mode == "zero-shot":
                user, system = _zero_shot_prompt(cfg, problem, ctx)
                outcome, code = _zero_shot(model, user, tr, system)
            else:
                outcome, code = _agent(
                    cfg,
                    model,
                    render("system.j2", **ctx),
                    render("task.j2", **ctx),
                    tr,
                    out / "work",
                    pool,
                    pkb_files(problem) if is_pkb(problem) else {},
                )
            result = result.model_copy(
                update=dict(
                    status=outcome.status,
                    message=outcome.message,
                    steps=outcome.steps,
                    cost_usd=outcome.cost_usd,
                    usage=outcome.usage,
                )
            )
            if code is not None:
                write_atomic(out / "solution.py", code)
                if is_pkb(problem):
                    export(cfg, problem.id, out / "solution.py", out, 0)
                check = check_kernel(cfg, out / "solution.py", gpus)
                tr.write("check", source="trusted", result=check.model_dump())
                result = result.model_copy(update=dict(check=check, correct=check.ok))
            elif outcome.status != "format_error":
                result.message += "; no solution.py to score"
        except (ConfigError, OutputError):  # the user's to fix: the command says so (a full disk, ...)
            raise
        except Exception as e:  # a broken sandbox or checker ends this sample, recorded, not the caller
            result = result.model_copy(update=dict(status="error", message=f"{type(e).__name__}: {e}"))
        result.wall_s = round(time.monotonic() - t0, 3)
        tr.write("final", **result.model_dump(include={"status", "message", "correct", "steps", "cost_usd", "usage", "wall_s"}))
    write_atomic(out / "result.json", result.model_dump_json(indent=2) + "\n")
    return result
