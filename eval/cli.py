"""`pkagent check` and `pkagent problems`."""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Optional

import typer

problems = typer.Typer(help="List the problem suite, or show one problem.", invoke_without_command=True, no_args_is_help=False)


def _fail_usage(message: str) -> None:
    typer.echo(f"pkagent: {message}", err=True)
    raise typer.Exit(2)


def _fmt_ms(ms: float) -> str:
    return f"{ms * 1e3:.1f} us" if ms < 1 else f"{ms:.3f} ms"


def report_lines(r) -> list[str]:
    """The human-readable summary of a CheckResult, as the agent and users read it."""
    lines = [
        f"status: {r.status}  ({r.problem}, world size {r.world_size}, {r.device}, {r.trials_passed}/{r.trials} trials passed)",
        f"  {r.message}",
    ]
    for d in r.ranks:
        if not d.ok and d.message and d.message not in r.message:
            extra = f" max abs err {d.max_abs_err:.3g}, max rel err {d.max_rel_err:.3g}" if d.max_abs_err is not None else ""
            lines.append(f"  rank {d.rank}: {d.message}{extra}")
    if r.stuck_ranks:
        lines.append(f"  stuck ranks: {r.stuck_ranks}")
    if r.collectives:
        lines.append(
            "  torch.distributed calls by the candidate: " + ", ".join(f"{k} x{v}" for k, v in sorted(r.collectives.items()))
        )
    if r.perf:
        p = r.perf
        for name, t in (("reference", p.reference), ("candidate", p.candidate)):
            frac = getattr(p, f"{name}_roofline_fraction")
            roof = f", {frac:.0%} of roofline" if frac is not None else ""
            lines.append(
                f"  {name:9s} {_fmt_ms(t.median_ms)} median per call (range {_fmt_ms(t.min_ms)} - {_fmt_ms(t.max_ms)} over "
                f"{t.batches} batches of {t.calls_per_batch} calls, max over ranks){roof}"
            )
        if p.speedup_ci:
            lo, hi = p.speedup_ci
            lines.append(
                f"  speedup {p.speedup:.3f}x (95 % interval {lo:.3f} - {hi:.3f} over {p.pairs} interleaved pairs; "
                f"{p.verified_calls} timed calls' outputs checked)"
            )
            if p.check_repro_pct:
                lines.append(
                    f"  the interval is at least ±{p.check_repro_pct:g} %: the run-to-run spread measured on {p.hardware}"
                )
            if lo <= 1 <= hi:
                lines.append("  the interval contains 1.0: too close to call a winner (more pairs: --time-budget)")
        else:
            lines.append(f"  speedup {p.speedup:.3f}x")
        if p.graphs:
            lines.append("  both sides timed as CUDA-graph replays of their batches (no Python while timed)")
        elif p.graphs_note not in ("", "off", "not on CUDA"):
            lines.append(f"  calls timed one by one, not as CUDA graphs: {p.graphs_note}")
        for name, t in (("reference", p.reference), ("candidate", p.candidate)):
            if t.host_bound:
                lines.append(
                    f"  {name}: host-bound ({t.host_fraction:.0%} of each batch spent issuing calls; the GPU mostly waited)"
                )
        if p.roofline_ms is not None:
            terms = ", ".join(f"{k} {_fmt_ms(v)}" for k, v in p.roofline_terms_ms.items())
            lines.append(f"  roofline {_fmt_ms(p.roofline_ms)} on {p.hardware} ({terms})")
    ph = r.phases
    lines.append(
        f"  wall {ph.total_s:.1f} s (start-up {ph.startup_s:.1f} s, correctness {ph.correctness_s:.1f} s, timing {ph.timing_s:.1f} s)"
    )
    if r.log_tail and r.status != "correct":
        lines.append("  --- end of the failing rank's output ---")
        lines.extend("  " + ln for ln in r.log_tail.strip().splitlines()[-25:])
    return lines


def check(
    candidate: Path = typer.Argument(..., help="The candidate file, exposing solution(*inputs)."),
    problem: str = typer.Option(..., "--problem", "-p", help="Problem id (see `pkagent problems`)."),
    world_size: int = typer.Option(2, "--world-size", "-w", help="Number of ranks (one GPU each)."),
    trials: int = typer.Option(5, "--trials", help="Correctness trials, each with fresh random inputs."),
    perf: bool = typer.Option(False, "--perf", help="Also time reference and candidate."),
    device: str = typer.Option("cuda", "--device", help="cuda (NCCL) or cpu (gloo)."),
    timeout: float = typer.Option(300.0, "--timeout", help="Seconds any rank may go without progress."),
    size: float = typer.Option(1.0, "--size", help="Scale of the problem's default sizes."),
    hardware: str = typer.Option("h200_2", "--hardware", help="Hardware profile for the roofline."),
    suite: Optional[str] = typer.Option(None, "--suite", help="pkagent (default) or pkb:PATH (a ParallelKernelBench checkout)."),
    seed: int = typer.Option(0, "--seed", help="Base seed of the trials' inputs."),
    repeats: int = typer.Option(16, "--repeats", help="Calls per trial on identical inputs; outputs that differ are a race."),
    time_budget: Optional[float] = typer.Option(
        None, "--time-budget", help="Seconds of timed pairs at most (default 6 on cuda, 2 on cpu)."
    ),
    ci_width: float = typer.Option(
        0.02, "--ci-width", help="Stop timing once the speedup's 95 % interval is this narrow (relative)."
    ),
    confine: str = typer.Option("auto", "--confine", help="auto (bubblewrap where it works), bwrap or none."),
    pass_env: list[str] = typer.Option([], "--pass-env", help="An environment variable the candidate may see (repeatable)."),
    graphs: str = typer.Option(
        "auto", "--graphs", help="Time CUDA-graph replays of both sides: auto (where a side is host-bound), on or off."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print only the JSON result."),
) -> None:
    """Check a candidate: correctness over several trials, optionally speed; last line is JSON."""
    from eval.check import check as run_check

    result = run_check(
        candidate,
        problem,
        world_size=world_size,
        device=device,
        trials=trials,
        perf=perf,
        size=size,
        timeout=timeout,
        hardware=hardware,
        suite=suite,
        seed=seed,
        repeats=repeats,
        time_budget_s=time_budget,
        ci_width=ci_width,
        confine=confine,
        pass_env=tuple(pass_env),
        graphs=graphs,
    )
    if not as_json:
        typer.echo("\n".join(report_lines(result)))
    typer.echo(result.model_dump_json())
    raise typer.Exit(0 if result.ok else 1)


def _rows(category: Optional[str], suite: Optional[str]):
    from eval.problem import ProblemError, all_problems
    from eval.suites import PKB_PREFIX, load_pkb, pkb_ids

    try:
        if suite and suite.startswith(PKB_PREFIX):
            root = Path(suite[len(PKB_PREFIX) :])
            probs = [load_pkb(root, pid) for pid in pkb_ids(root)]
        else:
            probs = all_problems()
    except ProblemError as e:
        _fail_usage(str(e))
    return [p for p in probs if category is None or p.meta.category == category]


@problems.callback()
def list_problems(
    ctx: typer.Context,
    category: Optional[str] = typer.Option(None, "--category", "-c", help="Only this category."),
    suite: Optional[str] = typer.Option(None, "--suite", help="pkagent (default) or pkb:PATH."),
    as_json: bool = typer.Option(False, "--json", help="One JSON list."),
) -> None:
    """List the suite: id, name, category, source, world sizes."""
    if ctx.invoked_subcommand:
        return
    from eval.problem import CATEGORIES

    if category and category not in CATEGORIES:
        _fail_usage(f"unknown category {category!r} (one of {', '.join(CATEGORIES)})")
    rows = _rows(category, suite)
    if as_json:
        out = []
        for p in rows:
            roof = p.roofline(p.meta.world_sizes[0]) if p.roofline else None
            out.append(
                {
                    "id": p.id,
                    "name": p.meta.name,
                    "category": p.meta.category,
                    "source": {"repo": p.meta.source_repo, "file": p.meta.source_file, "function": p.meta.source_function},
                    "world_sizes": list(p.meta.world_sizes),
                    "dtype": p.meta.dtype,
                    "peer_memory": p.meta.peer_memory,
                    "roofline": None if roof is None else {"world_size": p.meta.world_sizes[0], **vars(roof)},
                }
            )
        typer.echo(json.dumps(out, indent=1))
        return
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"{len(rows)} problems")
    for col in ("id", "name", "category", "source", "world sizes"):
        t.add_column(col)
    for p in rows:
        t.add_row(
            p.id,
            p.meta.name,
            p.meta.category,
            f"{p.meta.source_repo}: {p.meta.source_file}",
            ",".join(map(str, p.meta.world_sizes)),
        )
    Console(width=200).print(t)


def candidate_source(problem) -> str:
    """A standalone candidate that runs the problem's own reference code (correct, speedup ~1):
    the reference's source as solution(), importing the names of the problem module it uses."""
    import re
    from types import ModuleType

    src = inspect.getsource(problem.reference)
    body = src.replace(src.split("(", 1)[0], "def solution", 1)
    space = {k: v for k, v in vars(problem.module).items() if not k.startswith("__") and k != "reference"}
    used, text = set(), body
    while True:  # the names the reference uses, and the names those helpers use
        new = {k for k in space if k not in used and re.search(rf"\b{re.escape(k)}\b", text)}
        if not new:
            break
        used |= new
        for k in new:
            if inspect.isfunction(space[k]) and space[k].__module__ == problem.module.__name__:
                text += inspect.getsource(space[k])
    imports = sorted(
        f"import {v.__name__}" + (f" as {k}" if v.__name__ != k else "")
        for k, v in space.items()
        if k in used and isinstance(v, ModuleType)
    )
    names = [k for k in space if k in used and not isinstance(space[k], ModuleType)]
    helpers = f"from {problem.module.__name__} import {', '.join(names)}\n" if names else ""
    return (
        f'"""Candidate for {problem.id}: the reference itself (correct, speedup about 1).\n\n'
        f'Replace the body of solution() with a faster implementation; keep its signature.\n"""\n\n'
        + "\n".join(imports)
        + "\n\n"
        + helpers
        + "\n\n"
        + body
    )


@problems.command("show")
def show(
    problem_id: str = typer.Argument(..., metavar="ID"),
    as_candidate: bool = typer.Option(
        False, "--as-candidate", help="Print a valid candidate file that calls the reference's code."
    ),
    world_size: int = typer.Option(2, "--world-size", "-w", help="World size for the input shapes."),
    size: float = typer.Option(1.0, "--size", help="Scale of the default sizes."),
) -> None:
    """Describe one problem: description, reference source, input shapes, roofline."""
    from eval.problem import ProblemError, load_problem

    try:
        p = load_problem(problem_id)
    except ProblemError as e:
        _fail_usage(str(e))
    if as_candidate:
        typer.echo(candidate_source(p))
        return
    m = p.meta
    typer.echo(f"{p.id}: {m.name}\ncategory: {m.category}\nsource: {m.source_repo} {m.source_file} ({m.source_function})")
    typer.echo(f"world sizes: {list(m.world_sizes)}  dtype: {m.dtype}  peer-memory kernel expected: {m.peer_memory}")
    typer.echo("\n" + p.description + "\n")
    typer.echo(f"inputs of rank 0 at world size {world_size}, size {size:g}:")
    import torch

    try:
        inputs = p.make_inputs(0, world_size, 0, "cpu", size)
    except Exception as e:  # noqa: BLE001 - e.g. inputs that need a process group; shapes are informative only
        typer.echo(f"  (not shown without a process group: {type(e).__name__}; see make_inputs below)")
        inputs = ()
    for i, x in enumerate(inputs):
        typer.echo(f"  [{i}] " + (f"tensor {tuple(x.shape)} {x.dtype}" if isinstance(x, torch.Tensor) else type(x).__name__))
    if p.roofline:
        r = p.roofline(world_size, size)
        typer.echo(
            f"roofline per rank: {r.link_bytes / 1e6:.1f} MB over links, {r.hbm_bytes / 1e6:.1f} MB HBM, {r.flops / 1e9:.2f} GFLOP"
        )
    typer.echo("\nreference source:\n")
    typer.echo(inspect.getsource(p.module))
