"""`pkagent run`, `pkagent report` and `pkagent search` (registered by pkagent/cli.py): the
options, and what each command prints at the end; the work is in experiment.py, report.py and
search/."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import List, Optional

import typer


def run(
    config: str = typer.Argument(..., help="An experiment YAML file, or the name of one under configs/experiments/."),
    overrides: Optional[List[str]] = typer.Argument(
        None, metavar="[KEY=VALUE]...", help="Config overrides, e.g. samples=3 models=[openai:gpt-5] check.trials=2."
    ),
    redo: Optional[str] = typer.Option(
        None, "--redo", help="failed: rerun samples that ended in an error (model API, harness); all: rerun every sample."
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress display."),
) -> None:
    """Run an experiment: every problem x model x mode x sample, resumable; then `pkagent report RUN_DIR`."""
    from configs import load_experiment
    from experiments.experiment import run_experiment

    cfg = load_experiment(config, list(overrides or []))
    tally = run_experiment(cfg, redo=redo, progress=not quiet)
    root = Path(cfg.run_dir) / cfg.name
    typer.echo(
        f"{tally.done}/{tally.total} samples finished, {tally.passed} correct, ${tally.cost:.4f}; report: pkagent report {root}"
    )
    raise typer.Exit(0 if tally.done == tally.total else 3)


def report(
    run_dir: Path = typer.Argument(..., help="A run directory (RUN_DIR/NAME of `pkagent run`)."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON (also written to OUT/report.json)."),
    as_html: bool = typer.Option(False, "--html", help="Write OUT/report.html: tables and plots in one self-contained page."),
    as_csv: bool = typer.Option(False, "--csv", help="Write OUT/samples.csv (one row per sample) and OUT/summary.csv."),
    compare: Optional[Path] = typer.Option(None, "--compare", help="Another run directory, shown side by side."),
    out: Optional[Path] = typer.Option(None, "--out", help="Where files go (default RUN_DIR/report)."),
) -> None:
    """Report an experiment: pass@k, fast_p, speedups, failures, per model, mode and category."""
    from experiments.report import write_report

    write_report(run_dir, as_json=as_json, as_html=as_html, as_csv=as_csv, compare=compare, out=out)


def search(
    problem: Optional[str] = typer.Option(None, "--problem", help="Problem id (pkagent problems list)."),
    model: Optional[str] = typer.Option(
        None, "--model", help="openai:M, anthropic:M, google:M, openai-compatible:M or replay:PATH."
    ),
    config: Optional[str] = typer.Option(None, "--config", help="A search YAML file, or the name of one under configs/search/."),
    parallel: Optional[int] = typer.Option(None, "--parallel", help="Samples at once (default 2)."),
    budget_usd: Optional[float] = typer.Option(None, "--budget-usd", help="No new sample once this much is spent."),
    max_samples: Optional[int] = typer.Option(None, "--max-samples", help="Samples in all (default 20)."),
    target_roofline: Optional[float] = typer.Option(
        None, "--target-roofline", help="Stop when the best reaches this fraction of the roofline (CUDA)."
    ),
    target_speedup: Optional[float] = typer.Option(
        None, "--target-speedup", help="Stop when the best is this many times faster than the reference."
    ),
    refine_fraction: Optional[float] = typer.Option(
        None, "--refine-fraction", help="Share of samples that start from the best kernel (default 0.5)."
    ),
    patience: Optional[int] = typer.Option(None, "--patience", help="Stop when none of the last K samples improved the best."),
    mode: Optional[str] = typer.Option(None, "--mode", help="agent (default) or zero-shot."),
    device: Optional[str] = typer.Option(None, "--device", help="cuda (default) or cpu (gloo)."),
    world_size: Optional[int] = typer.Option(None, "--world-size", help="Ranks (default 2)."),
    out: Optional[str] = typer.Option(None, "--out", help="The search directory (default runs/search/PROBLEM); rerun to resume."),
    executor: Optional[str] = typer.Option(None, "--executor", help="local (default) or ray."),
    base_url: Optional[str] = typer.Option(None, "--base-url", help="API base URL of the model."),
    overrides: Optional[List[str]] = typer.Argument(
        None, metavar="[KEY=VALUE]...", help="Config overrides, e.g. size=0.5 verify.trials=30 agent.step_limit=30."
    ),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress lines."),
) -> None:
    """Search for the fastest correct kernel of one problem: agents in parallel, a shared
    leaderboard, every winner re-checked; writes OUT/best/solution.py. Rerun to resume."""
    from rich.console import Console

    from experiments.search import load_search, run_search, table

    cfg = load_search(
        config,
        list(overrides or []),
        problem=problem,
        model=model,
        parallel=parallel,
        budget_usd=budget_usd,
        max_samples=max_samples,
        target_roofline=target_roofline,
        target_speedup=target_speedup,
        refine_fraction=refine_fraction,
        patience=patience,
        mode=mode,
        device=device,
        world_size=world_size,
        out=out,
        executor=executor,
        base_url=base_url,
    )
    board = run_search(cfg, progress=not quiet)
    Console(width=shutil.get_terminal_size((140, 24)).columns).print(table(board))
    root = Path(cfg.out or Path("runs") / "search" / cfg.problem)
    if board["best"] is None:
        typer.echo(f"no kernel passed its re-check ({board['samples']} samples, ${board['cost_usd']:.4f}); see {root}")
        raise typer.Exit(1)
    typer.echo(
        f"best: {root / 'best' / 'solution.py'} (sample {board['best']}); {board['samples']} samples, "
        f"${board['cost_usd']:.4f}; stopped on {board['stopped']}"
    )
