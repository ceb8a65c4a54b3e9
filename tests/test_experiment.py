"""`pkagent run` and `pkagent report` end to end on CPU (gloo, 2 ranks, tiny sizes) with the fake
model server: a run killed with SIGKILL part-way resumes without losing or redoing a finished
sample, and the report's numbers match a count made by hand from the per-sample results; the
HTML report renders in headless Chromium; bad configs fail in one line; existing generations are
scored (locally and as Ray tasks); the cost limit and the GPU hand-out of the local executor."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections import Counter, defaultdict
from pathlib import Path

import deadlines
import pytest
from fakes import KEY_VARIABLES
from fakes.model_server import FakeModelServer, Say
from fakes.scripts import GLOO_ALL_REDUCE, write_command

from agent.solve import SolveConfig, SolveResult
from configs import ConfigError, load_experiment
from eval.cli import candidate_source
from eval.problem import load_problem
from experiments.executors import LocalExecutor, Task, run_in_child
from experiments.experiment import Tally, execute, generation_files, run_experiment
from experiments.report import build

SPEC = "anthropic:claude-haiku-4-5"
WRONG = "def solution(x, *rest):\n    return x.clone()\n"
PROBLEMS = ("all_reduce", "all_gather")
GOOD = {"all_reduce": GLOO_ALL_REDUCE, "all_gather": candidate_source(load_problem("all_gather"))}


class RoutedServer(FakeModelServer):
    """Answers by what is asked: the problem named in the prompt, the mode (tools sent: agent).
    The i-th request of a (problem, mode) gets a correct candidate, a wrong one, or none (a reply
    without code in zero-shot, a bare submit as an agent), for i mod 3 = 0, 1, 2."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.seen: Counter = Counter()
        self._route = threading.Lock()

    def answer(self, path, headers, raw):
        body = json.loads(raw or b"{}")
        problem = re.search(r"# Problem `(\w+)`", json.dumps(body)).group(1)
        mode = "agent" if body.get("tools") else "zero-shot"
        with self._route:
            i = self.seen[(problem, mode)]
            self.seen[(problem, mode)] += 1
            code = (GOOD[problem], WRONG, None)[i % 3]
            if mode == "zero-shot":
                say = Say(
                    f"Here it is:\n\n```python\n{code}```\n" if code else "I cannot write this one.", input=1000, output=200
                )
            elif code:
                say = Say(
                    "Writing and submitting.",
                    [("bash", {"command": write_command(code)}), ("submit", {})],
                    input=3000,
                    output=400,
                )
            else:
                say = Say("Submitting.", [("submit", {})], input=3000, output=10)
            self.script.append(say)
            return super().answer(path, headers, raw)


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in KEY_VARIABLES}
    return {**env, **extra}


def write_config(path: Path, run_dir: Path, url: str, **extra) -> Path:
    cfg = {
        "name": "e2e",
        "problems": list(PROBLEMS),
        "models": [SPEC],
        "modes": ["zero-shot", "agent"],
        "samples": 3,
        "world_size": 2,
        "device": "cpu",
        "size": 0.001,
        "run_dir": str(run_dir),
        "llm_concurrency": 2,
        "base_urls": {SPEC: url},
        "check": {"trials": 2},
        "agent": {"retry_wait_s": 0.01, "step_limit": 3},
        **extra,
    }
    path.write_text(json.dumps(cfg))  # JSON is YAML
    return path


def finished(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.glob("*/*/*/sample_*/result.json")}


@pytest.fixture(scope="module")
def resumed_run():
    """A 2 problems x 2 modes x 3 samples run, SIGKILLed after a few samples, then resumed."""
    tmp = Path(tempfile.mkdtemp(prefix="pkagent-e2e-"))
    with RoutedServer(api_key="sk-test-e2e-0123456789") as server:
        cfg = write_config(tmp / "e2e.yaml", tmp / "runs", server.url)
        env = clean_env(ANTHROPIC_API_KEY=server.api_key)
        root = tmp / "runs" / "e2e"
        cmd = [sys.executable, "-m", "pkagent", "run", str(cfg), "-q"]
        first = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        # kill part-way: 4 samples finished and at least one in flight, whatever the machine's pace
        deadlines.wait_until(
            lambda: len(finished(root)) >= 4 and any(root.glob("*/*/*/.sample_*")), proc=first, watch=[tmp / "runs"]
        )
        assert first.poll() is None, first.stderr.read().decode()
        os.kill(first.pid, signal.SIGKILL)
        first.wait()
        before = finished(root)
        requests_before = len(server.requests)
        leftovers = [p.name for p in root.glob("*/*/*/.sample_*")]
        second = deadlines.run(cmd, env=env, text=True, watch=[root])
        yield dict(
            root=root,
            before=before,
            leftovers=leftovers,
            second=second,
            after=finished(root),
            requests=(requests_before, len(server.requests) - requests_before),
        )
    shutil.rmtree(tmp, ignore_errors=True)


def test_kill_resume_and_report_match_a_hand_count(resumed_run):
    r = resumed_run
    root, before, after = r["root"], r["before"], r["after"]
    assert r["second"].returncode == 0, r["second"].stderr
    assert 4 <= len(before) < 12 and len(after) == 12
    assert all(after[k] == v for k, v in before.items())  # no finished sample was lost or redone
    assert r["leftovers"], "the kill left no sample in flight: it did not happen part-way"
    assert not list(root.glob("*/*/*/.sample_*"))  # the in-flight ones were cleaned up and rerun
    assert r["requests"][1] == 12 - len(before)  # one model request per sample, none for finished ones

    # the hand count, straight from the result files
    results = [json.loads(v) for v in after.values()]
    correct = defaultdict(Counter)
    failures = defaultdict(Counter)
    for res in results:
        problem = res["problem"]
        correct[res["mode"]][problem] += res["correct"]
        if not res["correct"]:
            failures[res["mode"]][
                "mismatch"
                if res["check"] and res["check"]["status"] == "incorrect"
                else "format"
                if res["status"] == "format_error"
                else "no candidate"
            ] += 1
    report = deadlines.run([sys.executable, "-m", "pkagent", "report", str(root), "--json"], text=True)
    assert report.returncode == 0, report.stderr
    data = json.loads(report.stdout)
    groups = {g["mode"]: g for g in data["groups"]}
    assert set(groups) == {"zero-shot", "agent"}
    for mode, g in groups.items():
        c = [correct[mode][p] for p in PROBLEMS]
        assert g["samples"] == 6 and g["problems"] == 2 and g["k"] == 3 and g["correct"] == sum(c)
        assert g["pass_at_k"]["1"] == pytest.approx(sum(x / 3 for x in c) / 2)
        assert g["pass_at_k"]["3"] == pytest.approx(sum(x > 0 for x in c) / 2)
        assert g["pass_at_k"]["2"] == pytest.approx(sum(1 - (3 - x) * (2 - x) / 6 if x < 2 else 1 for x in c) / 2)
        assert g["fast_p_at_1"]["0.0"] == g["pass_at_k"]["1"] and g["fast_p_at_1"]["1.0"] == 0  # not timed on CPU
        assert g["failures"] == dict(failures[mode])
        mine = [x for x in results if x["mode"] == mode]
        assert g["tokens_in"] == sum(x["usage"]["input_tokens"] for x in mine) > 0
        assert g["cost_usd"] == pytest.approx(sum(x["cost_usd"] for x in mine)) and g["cost_usd"] > 0
    assert sum(g["correct"] for g in groups.values()) > 0 and sum(sum(f.values()) for f in failures.values()) > 0


def test_html_report_renders_in_chromium(resumed_run, tmp_path):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("chromium is not installed (apt-get install -y chromium): the HTML report is not rendered")
    root = resumed_run["root"]
    out = deadlines.run(
        [sys.executable, "-m", "pkagent", "report", str(root), "--html", "--csv", "--out", str(tmp_path), "--compare", str(root)],
        text=True,
    )
    assert out.returncode == 0, out.stderr
    page = (tmp_path / "report.html").read_text()
    assert len(re.findall(r"<img alt='(pass_at_k|fast_p|modes)' src='data:image/png;base64,[A-Za-z0-9+/=]{1000,}'>", page)) == 3
    for cls in ("summary", "fast_p", "failures", "categories", "compare", "samples"):
        assert f'<table class="{cls}">' in page
    assert "<script" not in page and "<link" not in page and "http" not in page.split("<body>")[1]  # self-contained
    rows = list(csvreader(tmp_path / "samples.csv"))
    assert len(rows) == 12 and {r["mode"] for r in rows} == {"zero-shot", "agent"}

    shot = tmp_path / "shot.png"
    deadlines.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--window-size=1400,1200",
            f"--screenshot={shot}",
            (tmp_path / "report.html").as_uri(),
        ],
    )
    from PIL import Image

    img = Image.open(shot).convert("RGB")
    assert img.size == (1400, 1200)
    colours = img.getcolors(maxcolors=1 << 20)
    assert colours is not None and len(colours) > 50  # text, tables and plots, not a blank page
    blue = sum(n for n, (r, g, b) in colours if b > 150 and r < 80 and g < 150)  # matplotlib's first line colour
    assert blue > 500, "no plot drawn in the screenshot"


def csvreader(path):
    import csv

    with open(path) as f:
        yield from csv.DictReader(f)


@pytest.mark.parametrize(
    "override, words",
    [
        ("problems=[all_reduce,no_such_problem]", "problems: 'no_such_problem': unknown problem"),
        ("models=[foo:bar]", "unknown provider 'foo'"),
        ("models=[folder:/no/such/folder]", "no such folder of existing generations"),
        ("problems=[vocab]", "supports no"),
    ],
)
def test_bad_config_fails_fast_in_one_line(tmp_path, override, words):
    cfg = write_config(tmp_path / "bad.yaml", tmp_path / "runs", "http://127.0.0.1:9")
    if words == "supports no":  # a category where no problem runs at world size 3
        override, words = "problems=[all_reduce] world_size=3", "supports world sizes"
    out = deadlines.run(
        [sys.executable, "-m", "pkagent", "run", str(cfg), *override.split()],
        text=True,
        env=clean_env(ANTHROPIC_API_KEY="sk-unused-0123456789"),
    )
    assert out.returncode == 2, out.stderr
    assert words in out.stderr and out.stderr.strip().count("\n") == 0, out.stderr
    assert not (tmp_path / "runs").exists()


def test_generation_file_names(tmp_path):
    for name in (
        "reduce_cuda.py",
        "reduce_cuda_sample2.py",
        "reduce_scatter_cuda.py",
        "reduce_scatter_triton_sample1.py",
        "reduce_notes.txt",
        "reduce_two_words.py",
    ):
        (tmp_path / name).write_text("")
    assert {k: p.name for k, p in generation_files(tmp_path, "reduce").items()} == {
        0: "reduce_cuda.py",
        2: "reduce_cuda_sample2.py",
    }
    assert {k: p.name for k, p in generation_files(tmp_path, "reduce_scatter").items()} == {
        0: "reduce_scatter_cuda.py",
        1: "reduce_scatter_triton_sample1.py",
    }
    (tmp_path / "reduce_triton.py").write_text("")
    with pytest.raises(ConfigError, match="sample 0 of reduce has 2 files"):
        generation_files(tmp_path, "reduce")


def generations(folder: Path) -> Path:
    folder.mkdir()
    (folder / "all_reduce_gloo.py").write_text(GLOO_ALL_REDUCE)
    (folder / "all_reduce_gloo_sample1.py").write_text(WRONG)
    return folder


def test_existing_generations_on_ray(tmp_path):
    ray = pytest.importorskip("ray", reason="ray is not installed (pip install ray): the ray executor is not tested")
    folder = generations(tmp_path / "gens")
    cfg = load_experiment(
        write_config(tmp_path / "gens.yaml", tmp_path / "runs", ""),
        ["problems=[all_reduce]", f"models=[folder:{folder}]", "modes=[zero-shot]", "samples=3", "executor=ray"],
    )
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        tally = run_experiment(cfg, progress=False)
    finally:
        ray.shutdown()
    assert tally.done == 3 and tally.passed == 1
    data = build(tmp_path / "runs" / "e2e")
    (g,) = data["groups"]
    assert g["model"] == f"folder:{folder}" and g["correct"] == 1 and g["failures"] == {"mismatch": 1, "no candidate": 1}
    assert g["pass_at_k"][1] == pytest.approx(1 / 3) and g["pass_at_k"][3] == 1.0
    assert {(s["sample"], s["failure"]) for s in data["samples"]} == {(0, ""), (1, "mismatch"), (2, "no candidate")}


def fake_result(task: Task, cost: float) -> SolveResult:
    s = task.solve
    return SolveResult(problem=s.problem, model=s.model, mode=s.mode, status="completed", cost_usd=cost)


def test_cost_limit_stops_new_samples(tmp_path):
    tasks = [
        Task(
            solve=SolveConfig(problem="p", model="m:x", mode="zero-shot"),
            sample=k,
            dir=str(tmp_path / f"sample_{k}"),
            tmp=str(tmp_path / f".sample_{k}.tmp"),
        )
        for k in range(10)
    ]
    tally = execute(tasks, LocalExecutor(2, None, work=lambda task, acquire: fake_result(task, 1.0)), 2, Tally(total=10), 2.5)
    # two run at once: the third starts at $2 spent, after it nothing does (the running one finishes)
    assert tally.done in (3, 4) and tally.skipped == 10 - tally.done and tally.cost == tally.done
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"sample_{k}" for k in range(tally.done)]


def test_local_child_gets_gpus_from_the_pool_and_gives_them_back(tmp_path):
    from sandbox import GpuPool

    pool = GpuPool([[0, 1, 1, 1], [1, 0, 1, 1], [1, 1, 0, 1], [1, 1, 1, 0]])
    asked = []
    real = pool.acquire

    def acquire(n, timeout=None):
        asked.append((n, sorted(pool.free)))
        return real(n, timeout)

    folder = generations(tmp_path / "gens")
    task = Task(
        solve=SolveConfig(problem="all_reduce", model=f"folder:{folder}", mode="zero-shot", device="cuda", world_size=2),
        sample=0,
        dir=str(tmp_path / "sample_0"),
        tmp=str(tmp_path / ".sample_0.tmp"),
        candidate=str(folder / "all_reduce_gloo.py"),
    )
    result = run_in_child(task, acquire)
    assert asked == [(2, [0, 1, 2, 3])] and pool.free == {0, 1, 2, 3}
    # no CUDA here: the checker in the child, given GPUs 0 and 1, finds no device and says so
    assert result.status == "error" and "needs 2 GPUs" in result.message
