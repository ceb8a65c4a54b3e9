"""Deciding: which samples refine the best kernel and what they are told about it, and when to stop."""

from __future__ import annotations

import math

from experiments.search.config import SearchConfig
from experiments.search.state import Entry, State


def refines(k: int, fraction: float) -> bool:
    """Whether sample k starts from the best: `fraction` of the samples, spread evenly."""
    return math.floor((k + 1) * fraction) > math.floor(k * fraction)


def feedback(cfg: SearchConfig, state: State, e: Entry) -> str:
    """What a refining sample is told about the kernel it starts from."""
    d, large = e.verify["default"], e.verify["large"]
    p = d.perf
    text = (
        f"correct on {d.trials} trials at size {cfg.size:g} and {large.trials} at size {cfg.size * cfg.verify.size_factor:g} "
        f"(fresh inputs); {p.candidate.median_ms:.4g} ms per call (median of {p.candidate.batches} batches, "
        f"{p.candidate.min_ms:.4g} to {p.candidate.max_ms:.4g}) against the reference's {p.reference.median_ms:.4g} ms "
        f"timed in the same run: speedup {p.speedup:.2f}x"
    )
    if p.candidate_roofline_fraction is not None:
        bound = max(p.roofline_terms_ms, key=p.roofline_terms_ms.get) if p.roofline_terms_ms else "roofline"
        text += f", {p.candidate_roofline_fraction:.0%} of the {p.hardware} roofline ({p.roofline_ms:.4g} ms, {bound}-bound)"
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
        last = sorted(state.entries)[-cfg.patience :]
        better = state.improvements()
        if len(last) == cfg.patience and not any(
            k in better or k in verifying or state.needs_verify(state.entries[k]) for k in last
        ):
            return f"patience: none of the last {cfg.patience} samples improved the best"
    return None
