"""What a search writes and prints, derived from its state: the leaderboard (JSON, text, a rich
table), the progress plot, best/, and one line per finished job; files are rewritten atomically."""

from __future__ import annotations

import json
import math
from pathlib import Path

from configs.files import write_atomic
from experiments.search.config import SearchConfig
from experiments.search.state import Entry, State


def measured(c, size: float) -> dict | None:
    """A timed check as the leaderboard records it."""
    if c is None or c.perf is None:
        return None
    p = c.perf
    return {
        "size": size,
        "trials": c.trials,
        "ms": p.candidate.median_ms,
        "min_ms": p.candidate.min_ms,
        "max_ms": p.candidate.max_ms,
        "batches": p.candidate.batches,
        "reference_ms": p.reference.median_ms,
        "speedup": p.speedup,
        "roofline_fraction": p.candidate_roofline_fraction,
        "roofline_ms": p.roofline_ms,
        "hardware": p.hardware,
    }


def event_line(kind: str, e: Entry, state: State) -> str:
    r = e.result
    if kind == "sample":
        head = f"sample {e.k}" + (f" (refines {e.parent})" if e.parent is not None else " (from scratch)")
        if e.screen is None:
            why = r.check.status if r.check else r.status
            return f"{head}: [red]{why}[/] {r.message[:120]}  ${r.cost_usd:.4f}"
        p = e.screen.perf
        return f"{head}: [green]correct[/], {p.candidate.median_ms:.4g} ms (reference {p.reference.median_ms:.4g} ms)  ${r.cost_usd:.4f}"
    if not e.verified:
        return f"re-check of sample {e.k}: [red]failed[/]: " + "; ".join(f"{k} {c.status}" for k, c in (e.verify or {}).items())
    d, large = e.verify["default"].perf, e.verify["large"].perf
    crown = "  [bold green]best so far[/]" if state.best is e else ""
    return (
        f"re-check of sample {e.k}: {d.candidate.median_ms:.4g} ms (screen {e.screen_ms:.4g} ms, reference "
        f"{d.reference.median_ms:.4g} ms), at the larger size {large.candidate.median_ms:.4g} ms{crown}"
    )


def leaderboard(cfg: SearchConfig, state: State, stopped: str | None) -> dict:
    best, better = state.best, state.improvements()
    large = cfg.size * cfg.verify.size_factor
    rows = []
    ranked = state.ranked()
    for e in [*ranked, *sorted((e for e in state.entries.values() if e.screen is None), key=lambda e: e.k)]:
        r = e.result
        rows.append(
            {
                "rank": ranked.index(e) + 1 if e in ranked and e.time_ms is not None else None,
                "sample": e.k,
                "refined": e.parent,
                "status": r.status,
                "check": r.check.status if r.check else None,
                "message": (r.check.message if r.check and not r.correct else r.message)[:300],
                "time_ms": e.time_ms,
                "screen": measured(e.screen, cfg.size),
                "verify": None if e.verify is None else ("verified" if e.verified else "failed"),
                "verified": None
                if not e.verify
                else {
                    name: measured(c, cfg.size if name == "default" else large)
                    or {"status": c.status, "message": c.message[:300]}
                    for name, c in e.verify.items()
                },
                "improved": e.k in better,
                "best": e is best,
                "cost_usd": r.cost_usd,
                "steps": r.steps,
                "wall_s": r.wall_s,
            }
        )
    return {
        "problem": cfg.problem,
        "model": cfg.model,
        "mode": cfg.mode,
        "device": cfg.device,
        "world_size": cfg.world_size,
        "size": cfg.size,
        "large_size": large,
        "hardware": cfg.hardware,
        "verify": cfg.verify.model_dump(),
        "samples": len(state.entries),
        "cost_usd": state.cost,
        "best": best.k if best else None,
        "stopped": stopped,
        "entries": rows,
    }


def table(board: dict):
    """The leaderboard as a rich table: times are medians in ms per call, the reference's (timed
    in the same run) after the slash."""
    from rich.table import Table

    t = Table(
        title=f"{board['problem']} ({board['device']} x{board['world_size']}): {board['samples']} samples, "
        f"${board['cost_usd']:.4f}; ms per call, candidate / reference in the same run"
    )
    for col in (
        "rank",
        "sample",
        "refined",
        "screen",
        f"re-check, size {board['size']:g}",
        f"size {board['large_size']:g}",
        "speedup",
        "roofline",
        "cost",
    ):
        t.add_column(col, justify="left" if col == "refined" else "right", no_wrap=True)

    def ms(m):
        if not m:
            return ""
        return f"{m['ms']:.4g} / {m['reference_ms']:.4g}" if "ms" in m else f"[red]{m['status']}[/]"

    for row in board["entries"]:
        v = row["verified"] or {}
        d = v.get("default") if "ms" in v.get("default", {}) else None
        rank = "[bold green]best[/]" if row["best"] else str(row["rank"] or "")
        screen = ms(row["screen"]) or f"[red]{row['check'] or row['status']}[/]"
        t.add_row(
            rank,
            str(row["sample"]),
            "" if row["refined"] is None else f"from {row['refined']}",
            screen,
            ms(v.get("default")) or ("not needed" if row["screen"] else ""),
            ms(v.get("large")),
            f"{d['speedup']:.2f}x" if d else "",
            f"{d['roofline_fraction']:.0%}" if d and d["roofline_fraction"] is not None else "",
            f"${row['cost_usd']:.4f}",
        )
    return t


def plot(cfg: SearchConfig, state: State, path: Path) -> None:
    """Best verified time against samples and against cost (a kernel counts from its sample on)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ks = sorted(state.entries)
    cost, spent, best, low = [], 0.0, [], math.inf
    for k in ks:
        e = state.entries[k]
        spent += e.result.cost_usd
        low = min(low, e.verified_ms) if e.verified else low
        cost.append(spent)
        best.append(low if low < math.inf else math.nan)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), constrained_layout=True)
    for ax, xs, label in (
        (axes[0], list(range(1, len(ks) + 1)), "samples (in the order they started)"),
        (axes[1], cost, "cost (USD)"),
    ):
        ax.plot(xs, best, drawstyle="steps-post", marker="o", ms=4, label="best verified kernel")
        screened = [(x, state.entries[k].screen_ms) for x, k in zip(xs, ks) if state.entries[k].screen_ms is not None]
        if screened:
            ax.scatter(*zip(*screened), s=14, color="grey", label="each correct sample (screen)", zorder=3)
        rechecked = [(x, state.entries[k].verified_ms) for x, k in zip(xs, ks) if state.entries[k].verified]
        if rechecked:
            ax.scatter(*zip(*rechecked), s=30, marker="x", color="black", label="its re-check", zorder=3)
        if state.best is not None:
            ax.axhline(
                state.best.verify["default"].perf.reference.median_ms,
                color="red",
                ls="--",
                lw=1,
                label="reference (best's re-check)",
            )
        ax.set_xlabel(label)
        ax.set_ylabel(f"ms per call (median), size {cfg.size:g}")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"{cfg.problem}: {cfg.model} ({cfg.mode}), {cfg.device} x{cfg.world_size}")
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp, dpi=100)
    plt.close(fig)
    tmp.replace(path)


def write_outputs(cfg: SearchConfig, state: State, stopped: str | None) -> dict:
    from rich.console import Console

    root = state.root
    board = leaderboard(cfg, state, stopped)
    best = state.best
    if best is not None:
        (root / "best").mkdir(exist_ok=True)
        write_atomic(root / "best" / "solution.py", (root / "verify" / f"sample_{best.k}" / "solution.py").read_text())
        write_atomic(
            root / "best" / "result.json",
            json.dumps(
                {
                    "sample": best.k,
                    "refined": best.parent,
                    "problem": cfg.problem,
                    "model": cfg.model,
                    "screen": best.screen.model_dump(mode="json"),
                    "verified": {k: c.model_dump(mode="json") for k, c in best.verify.items()},
                    "sizes": {"default": cfg.size, "large": cfg.size * cfg.verify.size_factor},
                },
                indent=2,
            )
            + "\n",
        )
    write_atomic(root / "leaderboard.json", json.dumps(board, indent=2) + "\n")
    console = Console(record=True, width=140, file=open("/dev/null", "w"))
    console.print(table(board))
    write_atomic(root / "leaderboard.txt", console.export_text())
    if state.entries:
        plot(cfg, state, root / "progress.png")
    return board
