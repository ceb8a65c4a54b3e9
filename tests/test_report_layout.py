"""The outputs people look at: `pkagent report` tables fit the terminal (80 columns in a pipe),
report.html and run.html (`pkagent view --html`) are laid out for a 1280 px and a 420 px screen.
The pages are rendered in headless Chromium at both widths (skipped, saying so, without it): the
page never scrolls sideways, every chart is drawn, tables scroll inside their own box.
SCREENSHOTS_DIR=docs/screenshots keeps the screenshots (that is how docs/screenshots/ is made)."""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import sys
from pathlib import Path

import deadlines
import pytest

from agent.solve import SolveResult
from eval.result import CheckResult, Perf, Timing

ROOT = Path(__file__).resolve().parents[1]
MODELS = ("anthropic:claude-sonnet-4-6", "openai-compatible:Qwen/Qwen3-Coder-480B-A35B-Instruct")
PROBLEMS = {"all_reduce": "collective", "all_gather": "collective", "ag_gemm": "overlap", "ring_attention": "sequence"}
CHARTS = ("pass_at_k", "fast_p", "modes")


def make_run(root: Path, device: str, samples: int = 3) -> Path:
    """A finished run directory as `pkagent run` leaves it: 2 models x 2 modes x 4 problems."""
    rng = random.Random(7)
    cfg = {"device": device, "world_size": 2, "size": 1.0, "check": {"trials": 5}, "hardware": "h200_2", "samples": samples}
    meta = {"name": f"layout_{device}", "config": cfg, "problems": {p: {"category": c} for p, c in PROBLEMS.items()}}
    root.mkdir(parents=True)
    (root / "experiment.json").write_text(json.dumps(meta))
    statuses = ("correct", "correct", "incorrect", "timeout", "compile_error")
    for model in MODELS:
        for mode in ("zero-shot", "agent"):
            for problem in PROBLEMS:
                for k in range(samples):
                    status = rng.choice(statuses)
                    perf = None
                    if device == "cuda" and status == "correct":
                        ref, cand = rng.uniform(0.5, 2), rng.uniform(0.3, 2.5)
                        t = lambda ms: Timing(median_ms=ms, min_ms=ms * 0.95, max_ms=ms * 1.1, batches=10, calls_per_batch=5)  # noqa: E731
                        perf = Perf(
                            reference=t(ref),
                            candidate=t(cand),
                            speedup=ref / cand,
                            roofline_ms=0.2,
                            candidate_roofline_fraction=0.2 / cand,
                            hardware="h200_2",
                        )
                    check = CheckResult(
                        status=status,
                        problem=problem,
                        candidate="solution.py",
                        world_size=2,
                        device=device,
                        trials=5,
                        trials_passed=5 if status == "correct" else 1,
                        perf=perf,
                    )
                    result = SolveResult(
                        problem=problem,
                        model=model,
                        mode=mode,
                        status="submitted",
                        correct=status == "correct",
                        steps=rng.randint(1, 12),
                        cost_usd=rng.uniform(0, 0.4),
                        wall_s=rng.uniform(20, 300),
                        check=check,
                    )
                    d = root / model.replace(":", "_").replace("/", "_") / problem / mode / f"sample_{k}"
                    d.mkdir(parents=True)
                    (d / "result.json").write_text(result.model_dump_json())
    return root


def pkagent(*args: str, columns: int = 80) -> str:
    env = {**os.environ, "COLUMNS": str(columns)}
    out = deadlines.run([sys.executable, "-m", "pkagent", *args], text=True, env=env)
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.mark.parametrize("columns", [80, 200])
def test_report_tables_fit_the_terminal_and_say_so_in_a_pipe(tmp_path, columns):
    run = make_run(tmp_path / "run", "cuda")
    other = make_run(tmp_path / "other", "cuda")
    text = pkagent("report", str(run), "--compare", str(other), columns=columns)
    lines = [line.rstrip() for line in text.splitlines()]
    assert max(map(len, lines)) <= columns, max(lines, key=len)
    assert "…" not in text  # nothing cut to an ellipsis
    assert f"not a terminal: tables laid out for {columns} columns" in lines[-1]
    words = " ".join(lines)
    for header in ("pass@1", "fast_1@1", "geomean", "speedup", "roofline", "timeout/deadlock", "compile", "category"):
        assert header in words, header
    if columns == 80:  # the long model names are abbreviated, with a legend; the compared runs too
        assert f"M2 = {MODELS[1]}" in lines and "A = layout_cuda" in lines and "A: pass@1" in words
        assert re.search(r"per model and mode \(1/\d\)", text)
    else:
        assert MODELS[1] in words and "M1" not in words


def test_a_cpu_report_names_no_gpu_hardware(tmp_path):
    cpu, gpu = make_run(tmp_path / "cpu", "cpu"), make_run(tmp_path / "gpu", "cuda")
    pkagent("report", str(cpu), "--html", "--out", str(tmp_path / "cpu_out"))
    pkagent("report", str(gpu), "--html", "--out", str(tmp_path / "gpu_out"))
    assert "hardware profile" not in (tmp_path / "cpu_out" / "report.html").read_text()
    assert "hardware profile h200_2" in (tmp_path / "gpu_out" / "report.html").read_text()


def test_run_html_is_full_width_highlighted_and_collapses_long_outputs(tmp_path):
    page = tmp_path / "run.html"
    pkagent("view", str(ROOT / "examples/all_reduce_cpu/transcript.jsonl"), "--html", str(page))
    text = page.read_text()
    assert "<script" not in text and "http" not in text.split("<body>")[1]  # self-contained
    assert 'class="highlight"' in text and '<span class="k">' in text  # pygments: keywords in code marked up
    assert "<details" in text and "lines</summary>" in text
    assert "max-width" not in re.search(r"\bbody\s*\{[^}]*\}", text).group(0)  # no narrow column of text
    full = tmp_path / "full.html"
    pkagent("view", str(ROOT / "examples/all_reduce_cpu/transcript.jsonl"), "--html", str(full), "--full")
    assert "<details open" in full.read_text() and "<details>" not in full.read_text()


# --- headless Chromium -------------------------------------------------------------------------

PROBE = """<script>
window.addEventListener('load', () => {
  const w = document.documentElement.clientWidth;
  const imgs = [...document.images].filter(i => i.complete && i.naturalWidth > 0 && i.getBoundingClientRect().right <= w + 1);
  const boxes = [...document.querySelectorAll('table')].map(t => t.parentElement.getBoundingClientRect().right <= w + 1);
  const pre = [...document.querySelectorAll('pre')].map(p => p.getBoundingClientRect().right <= w + 1);
  document.body.setAttribute('data-probe', JSON.stringify({viewport: w, page: document.documentElement.scrollWidth,
    height: document.documentElement.scrollHeight,
    charts: imgs.map(i => i.alt), boxes_inside: boxes.every(Boolean), pre_inside: pre.every(Boolean)}));
});
</script>"""


def chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.skip("chromium is not installed (apt-get install -y chromium): the HTML pages are not rendered")
    return path


def render(page: Path, width: int, tmp: Path) -> tuple[dict, Path]:
    """Load `page` at `width` px in headless Chromium: what the probe measured, and a full-page screenshot."""
    probed = tmp / f"probe_{page.stem}_{width}.html"
    probed.write_text(page.read_text().replace("</body>", PROBE + "</body>"))
    flags = [
        chromium(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp / 'profile'}",
        "--virtual-time-budget=5000",
    ]
    dom = deadlines.run([*flags, f"--window-size={width},900", "--dump-dom", probed.as_uri()], text=True)
    m = re.search(r"data-probe=\"([^\"]*)\"", dom.stdout)
    assert m, dom.stderr[-2000:]
    probe = json.loads(m.group(1).replace("&quot;", '"'))
    height = min(max(900, probe["height"]), 8000)
    shot = tmp / f"{page.stem}_{width}.png"
    deadlines.run([*flags, f"--window-size={width},{height}", f"--screenshot={shot}", page.as_uri()])
    assert shot.is_file()
    return probe, shot


@pytest.mark.parametrize("width", [1280, 420])
def test_pages_in_chromium_fit_the_screen_with_every_chart(tmp_path, width):
    run = make_run(tmp_path / "run", "cuda")
    pkagent("report", str(run), "--html", "--compare", str(run), "--out", str(tmp_path / "report"))
    pkagent("view", str(ROOT / "examples/all_reduce_cpu/transcript.jsonl"), "--html", str(tmp_path / "run.html"))
    shots = []
    for page, charts in ((tmp_path / "report" / "report.html", CHARTS), (tmp_path / "run.html", ())):
        probe, shot = render(page, width, tmp_path)
        assert probe["page"] <= probe["viewport"], f"{page.name} at {width} px scrolls sideways: {probe}"
        assert sorted(probe["charts"]) == sorted(charts), probe
        assert probe["boxes_inside"] and probe["pre_inside"], probe
        shots.append(shot)
    keep = os.environ.get("SCREENSHOTS_DIR")
    if keep:
        for shot in shots:
            shutil.copy(shot, Path(keep) / shot.name)
