"""`pkagent solve`, `pkagent view` and `pkagent demo` (registered by pkagent/cli.py)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import List, Optional

import typer

from configs import ConfigError


def _default_out(kind: str, problem: str, mode: str) -> Path:
    return Path("runs") / kind / f"{problem}_{mode}_{time.strftime('%Y%m%d-%H%M%S')}"


def print_summary(result) -> None:  # result: agent.solve.SolveResult
    from rich.console import Console
    from rich.table import Table

    table = Table.grid(padding=(0, 2))
    table.add_column(no_wrap=True)
    table.add_column(overflow="fold")  # paths and messages wrap, never cut
    check = result.check
    verdict = "[bold green]correct[/]" if result.correct else f"[bold red]{check.status if check else 'not scored'}[/]"
    rows = [
        ("problem", f"{result.problem} ({result.mode})"),
        ("model", result.model),
        ("ended", f"{result.status}: {result.message}"),
        (
            "score",
            verdict
            + (f", {check.trials_passed}/{check.trials} trials, {check.world_size} ranks on {check.device}" if check else ""),
        ),
    ]
    if check and check.message and not result.correct:
        rows.append(("checker says", check.message))
    if check and check.perf:
        p = check.perf
        rows.append(
            (
                "time",
                f"{p.candidate.median_ms:.4g} ms per call (median of {p.candidate.batches} batches) vs "
                f"reference {p.reference.median_ms:.4g} ms: speedup {p.speedup:.2f}x"
                + (
                    f", {p.candidate_roofline_fraction:.0%} of the {p.hardware} roofline"
                    if p.candidate_roofline_fraction is not None
                    else " (no roofline for this problem)"
                ),
            )
        )
    u = result.usage
    rows += [
        ("steps", str(result.steps)),
        ("tokens", f"{u.input_tokens} in + {u.cached_tokens} cached + {u.cache_write_tokens} cache-write, {u.output_tokens} out"),
        (
            "cost",
            f"${result.cost_usd:.4f}" + (" (replayed turns: no model was called)" if result.model.startswith("replay:") else ""),
        ),
        ("wall", f"{result.wall_s:.1f} s"),
    ]
    for k, v in rows:
        table.add_row(f"[bold]{k}[/]", v)
    Console().print(table)
    for name in ("transcript.jsonl", "solution.py", "result.json"):  # whole lines, for copy and paste
        if (Path(result.out_dir) / name).exists():
            typer.echo(f"{name.split('.')[0] + ':':<12}{Path(result.out_dir) / name}")


def solve(
    problem: str = typer.Option(
        ..., "--problem", help="Problem id (pkagent problems list; with --suite pkb:PATH, a number or stem)."
    ),
    suite: Optional[str] = typer.Option(None, "--suite", help="pkagent (default) or pkb:PATH, a ParallelKernelBench checkout."),
    model: str = typer.Option(..., "--model", help="openai:M, anthropic:M, google:M, openai-compatible:M or replay:TRANSCRIPT."),
    mode: str = typer.Option("agent", "--mode", help="agent (multi-turn, bash in a sandbox) or zero-shot."),
    base_url: Optional[str] = typer.Option(
        None, "--base-url", help="API base URL (openai-compatible: required, or OPENAI_COMPATIBLE_BASE_URL)."
    ),
    sandbox: str = typer.Option("local", "--sandbox", help="local or docker."),
    device: str = typer.Option("cuda", "--device", help="cuda, or cpu (gloo, no GPU)."),
    world_size: int = typer.Option(2, "--world-size", help="Ranks."),
    out: Optional[Path] = typer.Option(None, "--out", help="Run directory (default runs/solve/PROBLEM_MODE_TIME)."),
    overrides: Optional[List[str]] = typer.Argument(
        None, metavar="[KEY=VALUE]...", help="Config overrides, e.g. agent.step_limit=20 size=0.01 check.trials=3."
    ),
) -> None:
    """Solve one problem with one model; writes OUT/transcript.jsonl, solution.py and result.json."""
    from agent.solve import make_config
    from agent.solve import solve as run_solve
    from eval.problem import ProblemError
    from eval.suites import qualify

    try:
        ref = qualify(problem, suite)
    except ProblemError as e:
        raise ConfigError(f"--suite: {e}") from None
    cfg = make_config(
        list(overrides or []),
        problem=ref,
        model=model,
        mode=mode,
        base_url=base_url,
        device=device,
        world_size=world_size,
        sandbox={"backend": sandbox},
    )
    result = run_solve(cfg, out or _default_out("solve", problem, cfg.mode))
    print_summary(result)
    raise typer.Exit(0 if result.correct else 1)


def view(
    transcript: Path = typer.Argument(..., help="A transcript.jsonl (or the run directory holding it)."),
    html: Optional[Path] = typer.Option(None, "--html", help="Also write a self-contained HTML page here."),
    full: bool = typer.Option(
        False, "--full", help="Long prompts and outputs whole in the terminal, and unfolded in the HTML page."
    ),
) -> None:
    """Print a transcript readably."""
    from agent.transcript import view as show

    path = transcript / "transcript.jsonl" if transcript.is_dir() else transcript
    if not path.is_file():
        raise ConfigError(f"{path}: transcript not found")
    show(path, html=html, full=full)
    if html is not None:
        typer.echo(f"wrote {html}")


def demo(
    out: Optional[Path] = typer.Option(None, "--out", help="Run directory (default runs/demo/all_reduce_agent_TIME)."),
) -> None:
    """Replay a recorded agent run that solves all_reduce on CPU (gloo, 2 ranks) through the
    real sandbox and checker: no API key, no GPU."""
    from agent.demo import run_demo

    result = run_demo(out or _default_out("demo", "all_reduce", "agent"))
    print_summary(result)
    typer.echo(f"\nRead the run: pkagent view {Path(result.out_dir) / 'transcript.jsonl'}")
    raise typer.Exit(0 if result.correct else 1)
