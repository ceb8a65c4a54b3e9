"""`pkagent demo`: a recorded agent run on all_reduce (demo.jsonl, shipped in the package; recorded
by tests/fakes/record_demo.py) replayed through the real sandbox and checker on CPU (gloo, 2
ranks): no API key, no GPU."""

from __future__ import annotations

from pathlib import Path

from agent.solve import SolveResult, make_config, solve

TRANSCRIPT = Path(__file__).with_name("demo.jsonl")


def run_demo(out: Path) -> SolveResult:
    cfg = make_config(
        problem="all_reduce",
        model=f"replay:{TRANSCRIPT}",
        mode="agent",
        device="cpu",
        world_size=2,
        size=0.001,
        check={"trials": 5, "perf": False},
        sandbox={"backend": "local"},
    )
    return solve(cfg, out)
