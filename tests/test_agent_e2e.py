"""End to end on CPU (gloo, 2 ranks, size 0.001): scripted models on the fake server drive the
real loop, local sandbox and checker; the shipped demo replays; a run killed with SIGKILL keeps
its transcript; no API key reaches any file or the sandbox."""

import json
import os
import secrets
import signal
import subprocess
import sys
from pathlib import Path

import deadlines
import pytest
from fakes import KEY_VARIABLES, SPECS
from fakes.model_server import FakeModelServer, Say, Slow
from fakes.scripts import GLOO_ALL_REDUCE, solving_turns

from agent.solve import make_config, solve
from agent.transcript import read
from configs import load_models

ROOT = Path(__file__).resolve().parents[1]
FAST = ["agent.retry_wait_s=0.01", "size=0.001", "check.trials=2", f"check.timeout_s={deadlines.scaled(120):.0f}"]


@pytest.fixture
def server(monkeypatch):
    for name in KEY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    with FakeModelServer(api_key=f"sk-test-{secrets.token_hex(12)}") as srv:
        for _, var, _ in SPECS.values():
            monkeypatch.setenv(var, srv.api_key)
        yield srv


def files_containing(root: Path, needle: str) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and needle.encode() in p.read_bytes()]


@pytest.mark.parametrize("provider", SPECS)
def test_scripted_agent_solves_all_reduce_on_cpu(server, tmp_path, provider):
    spec, var, suffix = SPECS[provider]
    turns = solving_turns()
    snoop = Say(
        "Checking the environment.",
        [("bash", {"command": f"env | sort > env.txt; echo key=${var}"})],
        input=200,
        cached=3000,
        output=20,
    )
    server.push(turns[0], snoop, *turns[1:])
    out = tmp_path / "run"
    cfg = make_config(FAST, problem="all_reduce", model=spec, base_url=server.url + suffix, device="cpu", world_size=2)
    result = solve(cfg, out)

    assert result.status == "submitted" and result.correct, result.model_dump_json(indent=1)
    assert result.check.status == "correct" and result.check.trials_passed == 2 and result.check.device == "cpu"
    tr = read(out / "transcript.jsonl")
    kinds = [e["event"] for e in tr]
    assert kinds[0] == "start" and "prompt" in kinds[1:3] and kinds[-1] == "final"
    checks = [(e["source"], e["result"]["status"]) for e in tr if e["event"] == "check"]
    assert checks == [("agent", "correct"), ("trusted", "correct")]
    assert (out / "solution.py").read_text() == GLOO_ALL_REDUCE
    assert json.loads((out / "result.json").read_text())["check"]["status"] == "correct"

    # tokens and cost add up: per reply, in the total, against the price list
    said = [turns[0], snoop, *turns[1:]]
    assert result.usage.input_tokens == sum(s.input for s in said)
    assert result.usage.cached_tokens == sum(s.cached for s in said)
    assert result.usage.output_tokens == sum(s.output for s in said)
    costs = [e["reply"]["cost_usd"] for e in tr if e["event"] == "response"]
    assert result.cost_usd == pytest.approx(sum(costs)) == pytest.approx(tr[-1]["cost_usd"])
    price = load_models().prices.get(spec.split(":", 1)[1])
    if price is None:  # no entry: counted at zero, and the transcript says so
        assert result.cost_usd == 0 and any(e["event"] == "warning" and "no price" in e["message"] for e in tr)
    else:
        cached = price.cached_input if price.cached_input is not None else price.input
        expected = sum(s.input * price.input + s.cached * cached + s.output * price.output for s in said) / 1e6
        assert result.cost_usd == pytest.approx(expected) and result.cost_usd > 0

    # the key never reached the sandbox, nor any file the run wrote
    assert "key=\n" in [e["output"] for e in tr if e["event"] == "observation"][1]
    assert (out / "work" / "env.txt").is_file()
    assert files_containing(out, server.api_key) == []


def test_zero_shot_candidate_is_checked(server, tmp_path):
    spec, _, suffix = SPECS["google"]
    server.push(Say(f"A two-shot all-reduce on gloo:\n\n```python\n{GLOO_ALL_REDUCE}```\n", input=4000, output=500))
    cfg = make_config(FAST, problem="all_reduce", model=spec, base_url=server.url + suffix, mode="zero-shot", device="cpu")
    result = solve(cfg, tmp_path / "z")
    assert result.status == "completed" and result.correct and result.steps == 1, result.model_dump_json(indent=1)
    assert (tmp_path / "z" / "solution.py").read_text() == GLOO_ALL_REDUCE
    assert files_containing(tmp_path / "z", server.api_key) == []


def test_demo_replays_the_shipped_transcript(tmp_path):
    """`pkagent demo`: no key, no GPU; the real sandbox and checker; says where its files are."""
    env = {k: v for k, v in os.environ.items() if k not in KEY_VARIABLES}
    out = deadlines.run(
        [sys.executable, "-m", "pkagent", "demo", "--out", str(tmp_path / "demo")],
        text=True,
        env=env,
        cwd=tmp_path,
        watch=[tmp_path / "demo"],
    )
    assert out.returncode == 0, out.stdout + out.stderr
    result = json.loads((tmp_path / "demo" / "result.json").read_text())
    assert result["correct"] and result["status"] == "submitted" and result["cost_usd"] == 0
    assert str(tmp_path / "demo" / "transcript.jsonl") in out.stdout and "result.json" in out.stdout
    tr = read(tmp_path / "demo" / "transcript.jsonl")
    checks = [(e["source"], e["result"]["status"]) for e in tr if e["event"] == "check"]
    assert checks == [("agent", "incorrect"), ("agent", "correct"), ("trusted", "correct")]
    recorded = [e["reply"] for e in read(ROOT / "examples/all_reduce_cpu/transcript.jsonl") if e["event"] == "response"]
    replayed = [e["reply"] for e in tr if e["event"] == "response"]
    assert [r["tool_calls"] for r in replayed] == [r["tool_calls"] for r in recorded]


def test_replay_past_its_end_is_a_model_error(tmp_path):
    lines = (ROOT / "examples/all_reduce_cpu/transcript.jsonl").read_text().splitlines()
    first = next(i for i, line in enumerate(lines) if json.loads(line)["event"] == "response")
    short = tmp_path / "short.jsonl"
    short.write_text("\n".join(lines[: first + 1]) + "\n")  # up to the first response
    cfg = make_config(FAST, problem="all_reduce", model=f"replay:{short}", device="cpu")
    result = solve(cfg, tmp_path / "r")
    assert result.status == "model_error" and "all 1 recorded turns played" in result.message and result.steps == 1


def test_transcript_survives_kill_9(server, tmp_path):
    spec, var, suffix = SPECS["anthropic"]
    server.push(
        Say("first", [("bash", {"command": "echo one"})]),
        Say("second", [("bash", {"command": "echo two"})]),
        Slow(60, Say("never")),
    )
    out = tmp_path / "killed"
    env = {k: v for k, v in os.environ.items() if k not in KEY_VARIABLES}
    env[var] = server.api_key
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pkagent",
            "solve",
            "--problem",
            "all_reduce",
            "--model",
            spec,
            "--base-url",
            server.url + suffix,
            "--device",
            "cpu",
            "--out",
            str(out),
            *FAST,
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    deadlines.wait_until(lambda: len(server.requests) >= 3, proc=proc, watch=[out])
    assert len(server.requests) == 3, proc.stderr.read().decode() if proc.poll() is not None else "no third request"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    text = (out / "transcript.jsonl").read_text()
    assert text.endswith("\n")
    events = [json.loads(line) for line in text.splitlines()]  # every line whole
    kinds = [e["event"] for e in events]
    assert kinds == ["start", "prompt", "response", "action", "observation", "response", "action", "observation"]
    assert [e["output"] for e in events if e["event"] == "observation"] == ["one\n", "two\n"]
    assert files_containing(out, server.api_key) == []


def test_view_prints_and_writes_html(tmp_path):
    transcript = ROOT / "examples/all_reduce_cpu/transcript.jsonl"
    page = tmp_path / "run.html"
    out = subprocess.run(
        [sys.executable, "-m", "pkagent", "view", str(transcript), "--html", str(page)], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert "check (trusted)" in out.stdout and "submitted" in out.stdout and "dtype torch.float32" in out.stdout
    html = page.read_text()
    assert html.lstrip().lower().startswith("<!doctype html") and "check (trusted)" in html
    assert "<script src" not in html and "<link" not in html  # self-contained
    missing = subprocess.run(
        [sys.executable, "-m", "pkagent", "view", str(tmp_path / "none.jsonl")], capture_output=True, text=True
    )
    assert missing.returncode == 2 and missing.stderr.strip().count("\n") == 0 and "transcript not found" in missing.stderr


def test_solve_cli_bad_input_is_one_line_exit_2(tmp_path, monkeypatch):
    env = {k: v for k, v in os.environ.items() if k not in KEY_VARIABLES}
    cases = [
        (["--model", "foo:bar"], "unknown provider 'foo'"),
        (["--model", "anthropic:claude-haiku-4-5"], "no API key: set ANTHROPIC_API_KEY"),
        (["--model", "openai-compatible:m"], "no base URL"),
        (["--model", "openai:gpt-5", "agent.step_limt=3"], "agent.step_limt: unknown key"),
    ]
    for args, words in cases:
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "pkagent",
                "solve",
                "--problem",
                "all_reduce",
                "--device",
                "cpu",
                "--out",
                str(tmp_path / "x"),
                *args,
            ],
            capture_output=True,
            text=True,
            env={**env, "OPENAI_API_KEY": "sk-present-but-unused"} if "openai:gpt-5" in args else env,
        )
        assert out.returncode == 2, (args, out.stderr)
        assert words in out.stderr and out.stderr.strip().count("\n") == 0, out.stderr
    assert not (tmp_path / "x").exists()
