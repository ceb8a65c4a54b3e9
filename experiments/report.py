"""`pkagent report RUN_DIR`: what an experiment's run directory says, per model and mode.

    load_run(dir)    every finished sample (sample_<k>/result.json) with its problem's category
    summarize(...)   per model and mode, and per category: pass@k for k = 1..n (unbiased, the mean
                     over problems), fast_p, geometric-mean speedup over correct samples, roofline
                     fraction, steps, tokens, cost, wall time and the failure taxonomy
    render_html      one self-contained page: tables and matplotlib plots inlined as base64 PNG
    pkb_rows         for runs on ParallelKernelBench problems, that benchmark's table: pass@1,
                     pass@k, fast_1, geomean speedup and its failure taxonomy (nvcc/syntax, tensor
                     shape, attribute/API typo, runtime error, output mismatch, deadlock)

Definitions (every number is computed from the samples, with eval/metrics.py):
- pass@k: Chen et al.'s unbiased estimator 1 - C(n-c, k)/C(n, k) per problem (n samples, c
  correct), averaged over the problems; k runs to the fewest samples any problem has.
- fast_p@k: the same estimator with c = samples that are correct AND more than p times faster
  than the reference (speedup = reference median time / candidate median time, both measured by
  the checker in the same run); p = 0 is pass@k, p = 1 "correct and faster" (ParallelKernelBench).
  Runs without timing (device cpu) have no speedups: fast_p is 0 for p > 0.
- geomean speedup and roofline fraction (roofline time / candidate time): over correct samples
  that were timed.
"""

from __future__ import annotations

import base64
import csv
import html
import io
import json
import re
import sys
import textwrap
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from configs import ConfigError
from configs.errors import InputFileError
from configs.files import make_dir, read_text, write_atomic
from eval.metrics import fast_p, geomean_speedup, mean_pass_at_k

P_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0)
FAILURES = {  # check status -> failure class
    "compile_error": "compile",
    "import_error": "import",
    "runtime_error": "runtime",
    "incorrect": "mismatch",
    "timeout": "timeout/deadlock",
    "cheating_detected": "cheating",
    "refused": "refused",
}
LIMITS = ("step_limit", "cost_limit", "time_limit", "context_length")
FAILURE_ORDER = (
    "compile",
    "import",
    "runtime",
    "mismatch",
    "timeout/deadlock",
    "cheating",
    "refused",
    "format",
    "limits",
    "no candidate",
    "model error",
    "harness error",
)


@dataclass
class Sample:
    model: str
    mode: str
    problem: str
    category: str
    k: int
    result: Any  # agent.solve.SolveResult

    @property
    def speedup(self) -> float | None:
        c = self.result.check
        return c.perf.speedup if self.result.correct and c is not None and c.perf is not None else None

    @property
    def roofline(self) -> float | None:
        c = self.result.check
        return c.perf.candidate_roofline_fraction if self.result.correct and c is not None and c.perf is not None else None


def failure(result) -> str | None:
    """The failure class of a sample; None when it is correct."""
    if result.correct:
        return None
    if result.check is not None:
        return FAILURES.get(result.check.status, result.check.status)
    if result.status == "format_error":
        return "format"
    if result.status in LIMITS:
        return "limits"
    if result.status == "model_error":
        return "model error"
    if result.status == "error":
        return "harness error"
    return "no candidate"  # ended without a solution.py to score


def pkb_failure(result) -> str | None:
    """A sample's class in ParallelKernelBench's failure taxonomy (eval.suites.failure_class);
    `no candidate` when nothing was scored (no code in the reply, limits, model errors)."""
    from eval.suites import failure_class

    if result.correct:
        return None
    return failure_class(result.check) if result.check is not None else "no candidate"


def load_run(root: Path, warn: bool = True) -> tuple[dict[str, Any], list[Sample]]:
    """The experiment's metadata and its finished samples."""
    from agent.solve import SolveResult

    meta_path = root / "experiment.json"
    if not meta_path.is_file():
        raise ConfigError(f"{root}: not a run directory (no experiment.json; `pkagent run` writes one)")
    try:
        meta = json.loads(read_text(meta_path))
        if not isinstance(meta, dict) or not isinstance(meta.get("problems"), dict) or "name" not in meta:
            raise ValueError("not the object `pkagent run` writes")
    except ValueError as e:
        raise InputFileError(f"{meta_path}: damaged ({e}); `pkagent run` on the same config writes it again") from None
    samples = []
    for path in sorted(root.glob("*/*/*/sample_*/result.json")):
        try:
            r = SolveResult.model_validate_json(read_text(path))
        except (ValueError, InputFileError) as e:  # counted, as the harness's failure, not the model's
            if isinstance(e, ValidationError):
                first = e.errors()[0]
                reason = ".".join(map(str, first["loc"])) + ": " + first["msg"] if first["loc"] else first["msg"]
            else:
                reason = str(e).strip().splitlines()[0]
            if warn:
                print(f"pkagent report: warning: {path}: damaged result ({reason}); counted as a harness error", file=sys.stderr)
            model = meta.get("models", {}).get(path.parents[3].name, path.parents[3].name)
            r = SolveResult(
                problem=path.parents[2].name,
                model=model,
                mode=path.parents[1].name,
                status="error",
                message=f"damaged result.json ({reason})",
                out_dir=str(path.parent),
            )
        problem = path.parents[2].name
        cat = meta["problems"].get(problem, {}).get("category", "other")
        samples.append(Sample(r.model, r.mode, problem, cat, int(path.parent.name.split("_")[1]), r))
    return meta, samples


def _by(samples: list[Sample], *keys: str) -> dict[tuple, list[Sample]]:
    out: dict[tuple, list[Sample]] = defaultdict(list)
    for s in samples:
        out[tuple(getattr(s, k) for k in keys)].append(s)
    return dict(sorted(out.items()))


def _counts(samples: list[Sample], p: float | None = None) -> list[tuple[int, int]]:
    """(n, c) per problem; c counts correct samples, or with p: correct and faster than p (fast_p's rule)."""
    out = []
    for group in _by(samples, "problem").values():
        hits = sum(s.result.correct if p is None else fast_p([(s.result.correct, s.speedup)], p) for s in group)
        out.append((len(group), int(hits)))
    return out


def _pass(samples: list[Sample], kmax: int, p: float | None = None) -> dict[int, float]:
    counts = _counts(samples, p)
    return {k: mean_pass_at_k(counts, k) for k in range(1, kmax + 1)}


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def summarize(samples: list[Sample]) -> dict[str, Any]:
    groups, categories = [], []
    for (model, mode), group in _by(samples, "model", "mode").items():
        kmax = min(n for n, _ in _counts(group))
        r = [s.result for s in group]
        speedups = [s.speedup for s in group if s.speedup is not None]
        fails = Counter(failure(x) for x in r if not x.correct)
        groups.append(
            {
                "model": model,
                "mode": mode,
                "problems": len(_by(group, "problem")),
                "samples": len(group),
                "correct": sum(x.correct for x in r),
                "k": kmax,
                "pass_at_k": _pass(group, kmax),
                "fast_p_at_1": {p: _pass(group, 1, p)[1] for p in P_VALUES},
                "fast_p_at_k": {p: _pass(group, kmax, p)[kmax] for p in P_VALUES},
                "geomean_speedup": geomean_speedup(speedups),
                "timed_correct": len(speedups),
                "roofline_fraction": _mean([s.roofline for s in group if s.roofline is not None]),
                "steps_mean": _mean([x.steps for x in r]),
                "tokens_in": sum(x.usage.prompt_tokens for x in r),
                "tokens_out": sum(x.usage.output_tokens for x in r),
                "cost_usd": sum(x.cost_usd for x in r),
                "wall_s": sum(x.wall_s for x in r),
                "wall_s_mean": _mean([x.wall_s for x in r]),
                "failures": {f: fails[f] for f in sorted(fails, key=lambda f: (FAILURE_ORDER + (f,)).index(f))},
                "pkb_failures": dict(Counter(pkb_failure(x) for x in r if not x.correct)),
            }
        )
        for (cat,), sub in _by(group, "category").items():
            kc = min(n for n, _ in _counts(sub))
            categories.append(
                {
                    "model": model,
                    "mode": mode,
                    "category": cat,
                    "problems": len(_by(sub, "problem")),
                    "samples": len(sub),
                    "correct": sum(s.result.correct for s in sub),
                    "k": kc,
                    "pass_at_1": _pass(sub, 1)[1],
                    "pass_at_k": _pass(sub, kc)[kc],
                    "fast_1_at_1": _pass(sub, 1, 1.0)[1],
                }
            )
    return {"groups": groups, "categories": categories}


def sample_rows(samples: list[Sample]) -> list[dict[str, Any]]:
    rows = []
    for s in sorted(samples, key=lambda s: (s.model, s.mode, s.problem, s.k)):
        r = s.result
        rows.append(
            {
                "model": s.model,
                "mode": s.mode,
                "problem": s.problem,
                "category": s.category,
                "sample": s.k,
                "status": r.status,
                "check": r.check.status if r.check else "",
                "failure": failure(r) or "",
                "taxonomy": pkb_failure(r) or "",
                "correct": r.correct,
                "speedup": s.speedup,
                "roofline_fraction": s.roofline,
                "steps": r.steps,
                "tokens_in": r.usage.prompt_tokens,
                "tokens_out": r.usage.output_tokens,
                "cost_usd": r.cost_usd,
                "wall_s": r.wall_s,
            }
        )
    return rows


def build(root: Path) -> dict[str, Any]:
    meta, samples = load_run(root)
    if not samples:
        raise ConfigError(f"{root}: no finished sample yet")
    pkb = any(str(p.get("ref", "")).startswith("pkb:") for p in meta["problems"].values())
    return {
        "run": meta["name"],
        "dir": str(root),
        "config": meta["config"],
        "pkb": pkb,
        **summarize(samples),
        "samples": sample_rows(samples),
    }


# --- plots ---------------------------------------------------------------------------------------------


def _label(g: dict[str, Any]) -> str:
    return f"{g['model']} ({g['mode']})"


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def _legend_below(ax) -> None:
    """The legend under the axes, one entry a line: long model names never cover the data."""
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(0, -0.16), frameon=False)


def plots(data: dict[str, Any], samples_by_group: dict[tuple, list[Sample]]) -> dict[str, str]:
    """Base64 PNGs: pass@k against k, fast_p@1 against p, zero-shot vs agent per model."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = {}
    fig, ax = plt.subplots(figsize=(6, 4))
    for g in data["groups"]:
        ks = sorted(int(k) for k in g["pass_at_k"])
        ax.plot(ks, [g["pass_at_k"][k] for k in ks], marker="o", label=_label(g))
    ax.set(
        xlabel="k (samples per problem)", ylabel="pass@k (unbiased, mean over problems)", ylim=(0, 1.02), title="pass@k against k"
    )
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.grid(alpha=0.3)
    _legend_below(ax)
    out["pass_at_k"] = _png(fig)

    fig, ax = plt.subplots(figsize=(6, 4))
    top = max([s.speedup for group in samples_by_group.values() for s in group if s.speedup] + [2.0])
    grid = [i * top * 1.1 / 200 for i in range(201)]
    for g in data["groups"]:
        group = samples_by_group[(g["model"], g["mode"])]
        ax.step(grid, [_pass(group, 1, p)[1] for p in grid], where="post", label=_label(g))
    ax.axvline(1.0, color="grey", lw=0.8, ls="--")
    ax.set(
        xlabel="p (speedup over the reference)",
        ylabel="fast_p@1 (correct and > p times faster)",
        ylim=(0, 1.02),
        title="fast_p against p",
    )
    ax.grid(alpha=0.3)
    _legend_below(ax)
    out["fast_p"] = _png(fig)

    models = sorted({g["model"] for g in data["groups"]})
    fig, axes = plt.subplots(1, len(models), figsize=(4.5 * len(models), 3.8), squeeze=False, layout="constrained")
    for ax, model in zip(axes[0], models):
        mine = [g for g in data["groups"] if g["model"] == model]
        metrics = [
            ("pass@1", lambda g: g["pass_at_k"][1]),
            (f"pass@{mine[0]['k']}", lambda g: g["pass_at_k"][g["k"]]),
            ("fast_1@1", lambda g: g["fast_p_at_1"][1.0]),
            ("fast_1@k", lambda g: g["fast_p_at_k"][1.0]),
        ]
        width = 0.8 / len(mine)
        for i, g in enumerate(mine):
            xs = [j + i * width for j in range(len(metrics))]
            ax.bar(xs, [f(g) for _, f in metrics], width, label=g["mode"])
        ax.set_xticks([j + width * (len(mine) - 1) / 2 for j in range(len(metrics))], [m for m, _ in metrics])
        ax.set(ylim=(0, 1.02), ylabel="fraction of problems")
        ax.set_title(textwrap.fill(model, 34), fontsize=10)
        ax.grid(alpha=0.3, axis="y")
        ax.legend(fontsize=8)
    fig.suptitle("zero-shot vs agent, per model")
    out["modes"] = _png(fig)
    return out


# --- output -------------------------------------------------------------------------------------------


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.3g}" if abs(v) >= 1e-3 or v == 0 else f"{v:.2e}"
    return str(v)


def summary_rows(data: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for g in data["groups"]:
        k = g["k"]
        rows.append(
            {
                "model": g["model"],
                "mode": g["mode"],
                "problems": g["problems"],
                "samples": g["samples"],
                "correct": g["correct"],
                "pass@1": g["pass_at_k"][1],
                f"pass@k (k={k})": g["pass_at_k"][k],
                "fast_1@1": g["fast_p_at_1"][1.0],
                "fast_1@k": g["fast_p_at_k"][1.0],
                "geomean speedup": g["geomean_speedup"],
                "roofline fraction": g["roofline_fraction"],
                "steps (mean)": g["steps_mean"],
                "tokens in": g["tokens_in"],
                "tokens out": g["tokens_out"],
                "cost $": g["cost_usd"],
                "wall s": g["wall_s"],
            }
        )
    return rows


def pkb_rows(data: dict[str, Any]) -> list[dict[str, Any]]:
    """ParallelKernelBench's table: per model and mode, pass@1, pass@k, correct-and-faster (fast_1)
    at 1 and k, the geometric-mean speedup of correct samples and the failures by its taxonomy."""
    from eval.suites import FAILURE_CLASSES

    rows = []
    for g in data["groups"]:
        k, fails = g["k"], g["pkb_failures"]
        rows.append(
            {
                "model": g["model"],
                "mode": g["mode"],
                "problems": g["problems"],
                "samples": g["samples"],
                "pass@1": g["pass_at_k"][1],
                f"pass@{k}": g["pass_at_k"][k],
                "fast_1@1": g["fast_p_at_1"][1.0],
                f"fast_1@{k}": g["fast_p_at_k"][1.0],
                "geomean speedup": g["geomean_speedup"],
                **{c: fails.get(c, 0) for c in (*FAILURE_CLASSES, "no candidate")},
            }
        )
    return rows


def _pkb_tables(data: dict[str, Any]) -> list[tuple[str, list[dict[str, Any]]]]:
    """pkb_rows as two tables for a terminal: the scores, and the failures by that taxonomy."""
    from eval.suites import FAILURE_CLASSES

    rows = pkb_rows(data)
    fails = ("model", "mode", *FAILURE_CLASSES, "no candidate")
    return [
        ("ParallelKernelBench's table", [{k: v for k, v in r.items() if k in fails[:2] or k not in fails} for r in rows]),
        ("ParallelKernelBench's failure taxonomy", [{k: r[k] for k in fails} for r in rows]),
    ]


def fast_p_rows(data: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "model": g["model"],
            "mode": g["mode"],
            **{f"fast_{p:g}@1": g["fast_p_at_1"][p] for p in P_VALUES},
            **{f"fast_{p:g}@{g['k']}": g["fast_p_at_k"][p] for p in P_VALUES},
        }
        for g in data["groups"]
    ]


def failure_rows(data: dict[str, Any]) -> list[dict[str, Any]]:
    seen = [f for f in FAILURE_ORDER if any(f in g["failures"] for g in data["groups"])]
    seen += sorted({f for g in data["groups"] for f in g["failures"]} - set(seen))
    return [
        {
            "model": g["model"],
            "mode": g["mode"],
            "failed": g["samples"] - g["correct"],
            **{f: g["failures"].get(f, 0) for f in seen},
        }
        for g in data["groups"]
    ]


def compare_rows(a: dict[str, Any], b: dict[str, Any]) -> list[dict[str, Any]]:
    """Both runs' main numbers per model and mode, side by side (a blank where a run lacks it)."""
    ga = {(g["model"], g["mode"]): g for g in a["groups"]}
    gb = {(g["model"], g["mode"]): g for g in b["groups"]}
    rows = []
    for key in sorted(set(ga) | set(gb)):
        row: dict[str, Any] = {"model": key[0], "mode": key[1]}
        other = b["run"] if b["run"] != a["run"] else f"{b['run']} ({b['dir']})"
        for name, g in ((a["run"], ga.get(key)), (other, gb.get(key))):
            row[f"{name}: pass@1"] = g["pass_at_k"][1] if g else None
            row[f"{name}: pass@k"] = g["pass_at_k"][g["k"]] if g else None
            row[f"{name}: fast_1@1"] = g["fast_p_at_1"][1.0] if g else None
            row[f"{name}: geomean speedup"] = g["geomean_speedup"] if g else None
            row[f"{name}: cost $"] = g["cost_usd"] if g else None
        rows.append(row)
    return rows


def _breakable(text: str) -> str:
    """Escaped, with line-break opportunities after : and / (model names, paths)."""
    return re.sub(r"([:/])", r"\1<wbr>", html.escape(text))


def _table(rows: list[dict[str, Any]], cls: str) -> str:
    """A table in a box of its own that scrolls sideways when the page is narrower than the table."""
    if not rows:
        return "<p>(none)</p>"
    head = "".join(f"<th>{_breakable(k)}</th>" for k in rows[0])
    body = "".join("<tr>" + "".join(f"<td>{_breakable(_fmt(v))}</td>" for v in r.values()) + "</tr>" for r in rows)
    return f'<div class="scroll"><table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


# Laid out for a wide (1280 px) and a narrow (420 px) screen: the page never scrolls sideways,
# tables scroll inside their box, plots wrap to the next row and shrink to the page.
CSS = """*{box-sizing:border-box}body{font-family:system-ui,sans-serif;margin:0 auto;padding:1em 2em;max-width:1500px;color:#222}
h1{font-size:1.6em;overflow-wrap:anywhere}h2{font-size:1.2em;margin-top:1.5em}
.scroll{overflow-x:auto;max-width:100%;margin:0.5em 0 1.5em}table{border-collapse:collapse}
th,td{border:1px solid #ccc;padding:3px 7px;font-size:13px;text-align:right;white-space:nowrap}
th{background:#f0f0f0;white-space:normal;min-width:4.5em;vertical-align:bottom}
td:first-child,td:nth-child(2),th:first-child,th:nth-child(2){text-align:left}
td:first-child{white-space:normal;min-width:9em}
.plots{display:flex;flex-wrap:wrap;gap:1em 1.5em}.plots figure{margin:0;flex:1 1 340px;max-width:100%}
.plots figure.wide{flex-basis:600px}.plots img{width:100%;height:auto;display:block}
p.note{font-size:13px;color:#555;max-width:60em;overflow-wrap:anywhere}summary{cursor:pointer;font-weight:600}
@media (max-width:600px){body{padding:0.5em 0.7em}h1{font-size:1.25em}th,td{font-size:12px;padding:2px 4px}}"""


def render_html(data: dict[str, Any], images: dict[str, str], other: dict[str, Any] | None = None) -> str:
    cfg = data["config"]
    wide = " class='wide'" if len({g["model"] for g in data["groups"]}) > 1 else ""  # one bar chart per model
    hardware = f"hardware profile {html.escape(cfg['hardware'])}, " if cfg["device"] == "cuda" else ""  # CPU: no GPU model
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>pkagent report: {html.escape(data['run'])}</title><style>{CSS}</style></head><body>",
        f"<h1>Experiment {html.escape(data['run'])}</h1>",
        f"<p class='note'>{html.escape(data['dir'])}: device {cfg['device']}, world size {cfg['world_size']}, "
        f"size {cfg['size']}, {cfg['check']['trials']} trials per check, {hardware}"
        f"up to {cfg['samples']} samples per problem. " + html.escape(DEFINITIONS) + "</p>",
        "<h2>Per model and mode</h2>",
        _table(summary_rows(data), "summary"),
        "<h2>fast_p: correct and more than p times faster</h2>",
        _table(fast_p_rows(data), "fast_p"),
        "<div class='plots'>"
        + "".join(
            f"<figure{wide if k == 'modes' else ''}><img alt='{k}' src='data:image/png;base64,{v}'></figure>"
            for k, v in images.items()
        )
        + "</div>",
        "<h2>Failures</h2>",
        _table(failure_rows(data), "failures"),
        *(["<h2>ParallelKernelBench's table</h2>", _table(pkb_rows(data), "pkb")] if data.get("pkb") else []),
        "<h2>Per category</h2>",
        _table(data["categories"], "categories"),
    ]
    if other is not None:
        parts += [f"<h2>Compared with {html.escape(other['run'])}</h2>", _table(compare_rows(data, other), "compare")]
    parts += ["<details><summary>Every sample</summary>", _table(data["samples"], "samples"), "</details></body></html>"]
    return "\n".join(parts)


DEFINITIONS = (
    "pass@k: unbiased estimator (Chen et al. 2021), mean over problems. fast_p: correct and more than p times "
    "faster than the reference (reference median / candidate median, timed by the checker in the same run). "
    "Geomean speedup and roofline fraction: over correct, timed samples."
)


def write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    f = io.StringIO(newline="")
    if rows:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    write_atomic(path, f.getvalue())


KEYS = ("model", "mode", "category")


def _fit(rows: list[dict[str, Any]], width: int) -> list[tuple[list[str], list[list[str]]]]:
    """Split a table's columns into pieces that fit `width` characters, each piece repeating the
    key columns (model, mode, category); a header wraps at its spaces, a number is never cut."""
    cols = list(rows[0])
    cells = {c: [_fmt(r[c]) for r in rows] for c in cols}
    need = {c: max([len(v) for v in cells[c]] + [len(w) for w in c.split()] + [min(len(c), 10)]) + 3 for c in cols}
    keys = [c for c in cols if c in KEYS]
    pieces: list[list[str]] = [[]]
    for c in (c for c in cols if c not in KEYS):
        used = 1 + sum(need[k] for k in keys + pieces[-1])
        if pieces[-1] and used + need[c] > width:
            pieces.append([])
        pieces[-1].append(c)
    out = []
    for piece in pieces:
        header = [textwrap.fill(c, need[c] - 3, break_long_words=False) for c in keys + piece]
        out.append((header, [[cells[c][i] for c in keys + piece] for i in range(len(rows))]))
    return out


def _abbreviate(rows: list[dict[str, Any]], names: dict[str, str], field: str) -> list[dict[str, Any]]:
    return [{**r, field: names.get(r[field], r[field])} if field in r else r for r in rows]


def print_tables(data: dict[str, Any], other: dict[str, Any] | None) -> None:
    """The report's tables, laid out for the terminal's width (80 columns in a pipe, or COLUMNS):
    a table too wide is split into pieces that repeat the model and mode, and where the model and
    mode columns would take half the width, models are named M1, M2, ... with a legend."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    width = console.width
    keep = re.compile(r"^(model|mode|problems|samples|pass@.*|fast_1@.*|geomean speedup|roofline fraction|cost \$)$")
    tables = [
        ("per model and mode", [{k: v for k, v in r.items() if keep.match(k)} for r in summary_rows(data)]),
        ("fast_p", fast_p_rows(data)),
        ("failures", failure_rows(data)),
        ("per category", data["categories"]),
        *(_pkb_tables(data) if data.get("pkb") else []),
    ]
    legend = []
    if other:
        rows = compare_rows(data, other)
        runs = {data["run"]: "A", (other["run"] if other["run"] != data["run"] else f"{other['run']} ({other['dir']})"): "B"}
        rows = [{re.sub(r"^(.*): ", lambda m: runs.get(m.group(1), m.group(1)) + ": ", k): v for k, v in r.items()} for r in rows]
        tables.append((f"compared with {other['run']}", rows))
        legend += [f"{short} = {name}" for name, short in runs.items()]
    models = sorted({r["model"] for _, rows in tables for r in rows if "model" in r})
    if max(map(len, models), default=0) + 15 > 0.45 * width:  # model and mode would take half the width
        names = {m: f"M{i}" for i, m in enumerate(models, 1)}
        tables = [(t, _abbreviate(rows, names, "model")) for t, rows in tables]
        legend = [f"{short} = {m}" for m, short in names.items()] + legend
    for title, rows in tables:
        if not rows:
            continue
        pieces = _fit(rows, width)
        for n, (header, body) in enumerate(pieces, 1):
            part = f" ({n}/{len(pieces)})" if len(pieces) > 1 else ""
            table = Table(title=f"{data['run']}: {title}{part}", title_justify="left")
            for h in header:
                table.add_column(h, justify="left" if h in KEYS else "right", no_wrap=True)
            for r in body:
                table.add_row(*r)
            console.print(table)
    for line in legend:
        console.print(line, highlight=False, overflow="fold")
    if not sys.stdout.isatty():
        console.print(f"(not a terminal: tables laid out for {width} columns; set COLUMNS to change)", highlight=False)


def write_report(
    run_dir: Path,
    as_json: bool = False,
    as_html: bool = False,
    as_csv: bool = False,
    compare: Path | None = None,
    out: Path | None = None,
) -> None:
    """Report an experiment: pass@k, fast_p, speedups, failures, per model, mode and category."""
    data = build(run_dir)
    other = build(compare) if compare else None
    out = out or run_dir / "report"
    written = []
    if as_json or as_html or as_csv:
        make_dir(out, "--out: cannot write")
    if as_json:
        text = json.dumps(
            {**data, "compare": other and {k: other[k] for k in ("run", "dir", "groups", "categories")}}, indent=2, default=str
        )
        write_atomic(out / "report.json", text + "\n")
        print(text)
        written.append(out / "report.json")
    if as_csv:
        write_csv(out / "samples.csv", data["samples"])
        write_csv(out / "summary.csv", [{**r, **f} for r, f in zip(summary_rows(data), fast_p_rows(data))])
        written += [out / "samples.csv", out / "summary.csv"]
        if data.get("pkb"):
            write_csv(out / "pkb.csv", pkb_rows(data))
            written.append(out / "pkb.csv")
    if as_html:
        _, samples = load_run(run_dir, warn=False)  # build() warned already
        write_atomic(out / "report.html", render_html(data, plots(data, _by(samples, "model", "mode")), other))
        written.append(out / "report.html")
    if not as_json:
        print_tables(data, other)
    for path in written:
        print(f"wrote {path}", file=sys.stderr)
