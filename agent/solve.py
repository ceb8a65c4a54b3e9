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
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from agent.loop import Agent, Outcome
from agent.models import Client, ModelError, Usage, get_model
from agent.transcript import Transcript
from configs import AgentConfig, CheckConfig, ConfigError, SandboxConfig, Strict, apply_overrides, validate
from eval.result import CheckResult

PYTHON_BLOCK = re.compile(r"```(?:python|py)[ \t]*\n(.*?)```", re.DOTALL)


class Refine(Strict):
    """A kernel to start from (agent/search.py): another sample's solution.py, what the checker
    measured for it, and its place on the search's leaderboard. Shown in the task prompt."""

    sample: int
    source: str
    feedback: str


class SolveConfig(Strict):
    problem: str
    model: str = Field(description="PROVIDER:MODEL, e.g. anthropic:claude-sonnet-4-5 or replay:PATH")
    mode: Literal["agent", "zero-shot"] = "agent"
    base_url: str | None = None
    world_size: int = Field(default=2, ge=1)
    device: Literal["cuda", "cpu"] = "cuda"
    size: float = Field(default=1.0, gt=0, description="problem size scale for the checks")
    hardware: str = "h200_2"
    agent: AgentConfig = Field(default_factory=AgentConfig)
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)
    check: CheckConfig = Field(default_factory=CheckConfig)
    refine: Refine | None = Field(default=None, description="start from this kernel (pkagent search)")


class SolveResult(BaseModel):
    problem: str
    model: str
    mode: str
    status: str  # how the sample ended: submitted, step_limit, ..., completed (zero-shot), format_error, error
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


def _gpus(cfg: SolveConfig, source: Any) -> Any:
    """A context manager of the GPU ids one phase of the sample holds (None on CPU)."""
    return source.acquire(cfg.world_size) if cfg.device == "cuda" else nullcontext(None)


def _gpu_source(cfg: SolveConfig, source: Any) -> Any:
    if cfg.device != "cuda" or source is not None:
        return source
    from sandbox import GpuPool

    pool = GpuPool.from_machine()
    if len(getattr(pool, "gpus", range(cfg.world_size))) < cfg.world_size:
        why = f" ({pool.note})" if pool.note else ""
        raise ConfigError(f"--device cuda: this machine has {len(pool.gpus)} GPUs{why} and the run needs "
                          f"{cfg.world_size}; without GPUs use --device cpu")
    return pool


@contextmanager
def _visible(ids: list[int] | None) -> Iterator[None]:
    """CUDA_VISIBLE_DEVICES=ids for the checker's rank processes, which inherit this environment."""
    if ids is None:
        yield
        return
    old = {k: os.environ.get(k) for k in ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")}
    os.environ.update(CUDA_VISIBLE_DEVICES=",".join(map(str, ids)), CUDA_DEVICE_ORDER="PCI_BUS_ID")
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _score(cfg: SolveConfig, path: Path, gpus: Any) -> CheckResult:
    """The trusted check; on the GPUs leased from `gpus` when given, else on this process's."""
    from eval.check import check

    with (_gpus(cfg, gpus) if gpus is not None else nullcontext(None)) as ids, _visible(ids):
        return check(str(path), cfg.problem, world_size=cfg.world_size, device=cfg.device, trials=cfg.check.trials,
                     perf=cfg.check.perf and cfg.device == "cuda", size=cfg.size, timeout=cfg.check.timeout_s,
                     hardware=cfg.hardware)


def _zero_shot(model: Client, prompt: str, tr: Transcript) -> tuple[Outcome, bytes | None]:
    messages = [{"role": "user", "content": prompt}]
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


def _agent(cfg: SolveConfig, model: Client, system: str, task: str, tr: Transcript, work: Path,
           gpus: Any) -> tuple[Outcome, bytes | None]:
    from sandbox import SandboxError, open_sandbox

    with _gpus(cfg, gpus) as ids, open_sandbox(cfg.sandbox, work, ids) as box:
        agent = Agent(model, box, cfg.agent, tr, output_limit=cfg.sandbox.output_limit_chars,
                      command_timeout=cfg.sandbox.command_timeout_s)
        outcome = agent.run(system, task)
        try:
            code = box.get("solution.py")
        except (OSError, SandboxError):
            code = None
    return outcome, code


def solve(cfg: SolveConfig, out: Path, gpus: Any = None) -> SolveResult:
    """Run one sample into `out`. On CUDA, `gpus` is where GPUs come from: anything with
    `acquire(n)`, a context manager of GPU ids, like sandbox.GpuPool. The sandbox holds
    world_size of them while the agent works, and the trusted check while it runs (with
    CUDA_VISIBLE_DEVICES set to them). Without `gpus`, the sandbox leases from this machine's
    pool and the check runs on this process's visible GPUs."""
    from configs import load_hardware
    from eval.problem import ProblemError, load_problem
    from prompts import render, task_context

    t0 = time.monotonic()
    try:
        problem = load_problem(cfg.problem)
    except ProblemError as e:
        raise ConfigError(f"--problem: {e}") from None
    hardware = load_hardware(cfg.hardware)
    model = get_model(cfg.model, cfg.agent, base_url=cfg.base_url)
    pool = _gpu_source(cfg, gpus)
    actions = model.actions or cfg.agent.actions
    out = Path(out)
    if (out / "transcript.jsonl").exists():
        raise ConfigError(f"--out {out}: holds a transcript already; choose another directory")
    out.mkdir(parents=True, exist_ok=True)
    ctx = task_context(problem, hardware, world_size=cfg.world_size, device=cfg.device, size=cfg.size, actions=actions)
    ctx["refine"] = cfg.refine.model_dump() if cfg.refine else None
    result = SolveResult(problem=cfg.problem, model=cfg.model, mode=cfg.mode, status="error", out_dir=str(out))
    with Transcript(out / "transcript.jsonl") as tr:
        tr.write("start", problem=cfg.problem, model=cfg.model, mode=cfg.mode, device=cfg.device,
                 world_size=cfg.world_size, size=cfg.size, hardware=cfg.hardware, actions=actions,
                 config=cfg.model_dump(), time=time.strftime("%Y-%m-%dT%H:%M:%S%z"))
        if model.price is None and model.provider != "replay":
            tr.write("warning", message=f"no price for {model.model} in configs/models.yaml: cost counted as 0")
        try:
            if cfg.mode == "zero-shot":
                outcome, code = _zero_shot(model, render("zero_shot.j2", **ctx), tr)
            else:
                outcome, code = _agent(cfg, model, render("system.j2", **ctx), render("task.j2", **ctx), tr, out / "work",
                                       pool)
            result = result.model_copy(update=dict(status=outcome.status, message=outcome.message, steps=outcome.steps,
                                                   cost_usd=outcome.cost_usd, usage=outcome.usage))
            if code is not None:
                (out / "solution.py").write_bytes(code)
                check = _score(cfg, out / "solution.py", gpus)
                tr.write("check", source="trusted", result=check.model_dump())
                result = result.model_copy(update=dict(check=check, correct=check.ok))
            elif outcome.status != "format_error":
                result.message += "; no solution.py to score"
        except ConfigError:
            raise
        except Exception as e:  # a broken sandbox or checker ends this sample, recorded, not the caller
            result = result.model_copy(update=dict(status="error", message=f"{type(e).__name__}: {e}"))
        result.wall_s = round(time.monotonic() - t0, 3)
        tr.write("final", **result.model_dump(include={"status", "message", "correct", "steps", "cost_usd", "usage", "wall_s"}))
    (out / "result.json").write_text(result.model_dump_json(indent=2) + "\n")
    return result
