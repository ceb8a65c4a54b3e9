"""The search's config: what to search for, with what, and when to stop; checked before anything runs."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from configs import ConfigError, SampleSettings, Strict, apply_overrides, read_yaml, resolve, validate


class VerifyConfig(Strict):
    trials: int = Field(default=20, ge=1, description="correctness trials of each re-check")
    batches: int = Field(
        default=45,
        ge=3,
        description="the least number of timed pairs (reference batch, candidate batch) of each re-check (a screen's least is 10)",
    )
    size_factor: float = Field(default=4.0, gt=0, description="the second re-check runs at size x this")
    seed: int = Field(default=1000, description="re-check inputs: seed + sample index (screens use seed 0)")


class SearchConfig(SampleSettings):
    problem: str
    model: str = Field(description="PROVIDER:MODEL, e.g. anthropic:claude-sonnet-4-6, or replay:PATH")
    mode: Literal["agent", "zero-shot"] = "agent"
    base_url: str | None = None
    parallel: int = Field(default=2, ge=1, description="samples at once")
    max_samples: int = Field(default=20, ge=1)
    budget_usd: float | None = Field(default=None, ge=0, description="no new sample once this is spent")
    target_roofline: float | None = Field(default=None, gt=0, description="stop at this roofline fraction (CUDA)")
    target_speedup: float | None = Field(default=None, gt=0, description="stop at this speedup over the reference")
    refine_fraction: float = Field(default=0.5, ge=0, le=1, description="share of samples that start from the best")
    patience: int | None = Field(default=None, ge=1, description="stop when none of the last K samples improved")
    out: str | None = Field(default=None, description="the search directory (default runs/search/PROBLEM)")
    gpus: list[int] | None = None
    executor: Literal["local", "ray"] = "local"
    ray_address: str | None = None
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
        raise ConfigError(
            f"problem: {cfg.problem} supports world sizes {list(problem.meta.world_sizes)}, not world_size={cfg.world_size}"
        )
    if not cfg.check.perf:
        raise ConfigError("check.perf: the search ranks kernels by their measured time; it must be true")
    if cfg.target_roofline is not None and cfg.device != "cuda":
        raise ConfigError("target_roofline: roofline fractions are measured on CUDA only; on CPU use target_speedup")
    from agent.models import get_model
    from configs import load_hardware

    load_hardware(cfg.hardware)
    get_model(cfg.model, cfg.agent, base_url=cfg.base_url)
    return cfg
