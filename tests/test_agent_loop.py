"""The agent loop through solve(), with scripted models on the fake server and the real local
sandbox: limits end a run with their status, format errors are told to the model and end the
run when repeated, text mode, prompts render strictly."""

import json
from pathlib import Path

import deadlines
import pytest
from fakes import KEY_VARIABLES, SPECS
from fakes.model_server import FakeModelServer, Say

from agent.solve import extract_python, make_config, solve
from agent.transcript import read
from configs import ConfigError, load_hardware

ROOT = Path(__file__).resolve().parents[1]
FAST = ["agent.retry_wait_s=0.01", f"agent.request_timeout_s={deadlines.scaled(30):.0f}", "size=0.001", "check.trials=2"]


@pytest.fixture
def server(monkeypatch):
    for name in KEY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    with FakeModelServer() as srv:
        for _, var, _ in SPECS.values():
            monkeypatch.setenv(var, srv.api_key)
        yield srv


def run(server, out, *overrides, provider="openai", mode="agent"):
    spec, _, suffix = SPECS[provider]
    cfg = make_config(
        FAST + list(overrides),
        problem="all_reduce",
        model=spec,
        base_url=server.url + suffix,
        mode=mode,
        device="cpu",
        world_size=2,
    )
    result = solve(cfg, out)
    return result, read(out / "transcript.jsonl")


def events(transcript, kind):
    return [e for e in transcript if e["event"] == kind]


def test_step_limit(server, tmp_path):
    server.push(*[Say(f"step {i}", [("bash", {"command": f"echo out-{i}"})]) for i in range(10)])
    result, tr = run(server, tmp_path / "r", "agent.step_limit=3")
    assert result.status == "step_limit" and result.steps == 3 and not result.correct and result.check is None
    assert [e["output"] for e in events(tr, "observation")] == ["out-0\n", "out-1\n", "out-2\n"]
    assert len(server.script) == 7 and tr[-1]["event"] == "final" and tr[-1]["status"] == "step_limit"
    assert json.loads((tmp_path / "r" / "result.json").read_text())["status"] == "step_limit"


def test_cost_limit(server, tmp_path):
    # gpt-5: 1.25 $/M input, 10 $/M output -> each of these replies costs $0.0325
    server.push(*[Say("", [("bash", {"command": "true"})], input=10000, output=2000) for _ in range(5)])
    result, tr = run(server, tmp_path / "r", "agent.cost_limit_usd=0.06")
    assert result.status == "cost_limit" and result.steps == 2
    assert result.cost_usd == pytest.approx(2 * (10000 * 1.25 + 2000 * 10.0) / 1e6)


def test_wall_time_limit_cuts_the_command_and_ends_the_run(server, tmp_path):
    server.push(Say("", [("bash", {"command": "sleep 30"})]), Say("", [("bash", {"command": "true"})]))
    result, tr = run(server, tmp_path / "r", "agent.wall_time_s=2")
    assert result.status == "time_limit" and result.steps == 1
    (obs,) = events(tr, "observation")
    assert obs["timed_out"] and obs["duration_s"] < 10


def test_repeated_format_errors_end_the_run(server, tmp_path):
    server.push(Say("I think the answer is 42."), Say("", [("frobnicate", {})]), Say("", [("bash", {})]), Say("still talking"))
    result, tr = run(server, tmp_path / "r", "agent.max_format_errors=3")
    assert result.status == "format_error" and result.steps == 3
    assert [e["count"] for e in events(tr, "format_error")] == [1, 2, 3]
    # the model was told what was wrong, in the history the server received
    last = server.requests[-1]["body"]["messages"]
    told = [m["content"] for m in last if m["role"] in ("user", "tool")]
    assert any("no tool call" in t for t in told) and any("unknown tool 'frobnicate'" in t for t in told)


def test_a_valid_action_resets_the_format_error_count(server, tmp_path):
    server.push(
        Say("hmm"),
        Say("", [("bash", {"command": "echo ok"})]),
        Say("hmm"),
        Say("", [("bash", {"command": "echo ok"})]),
        Say("", [("submit", {})]),
    )
    result, tr = run(server, tmp_path / "r", "agent.max_format_errors=2")
    assert result.status == "submitted" and result.steps == 5
    assert "no solution.py to score" in result.message and result.check is None


@pytest.mark.parametrize("provider", ["anthropic", "google"])
def test_text_mode_one_bash_block_per_reply(server, tmp_path, provider):
    server.push(
        Say("Two blocks:\n```bash\nls\n```\n```bash\npwd\n```"),
        Say("Listing.\n```bash\necho from-text-mode\n```"),
        Say("Done.\n```bash\nsubmit\n```"),
    )
    result, tr = run(server, tmp_path / "r", "agent.actions=text", provider=provider)
    assert result.status == "submitted" and result.steps == 3
    assert [e["output"] for e in events(tr, "observation")] == ["from-text-mode\n"]
    assert "tools" not in server.requests[0]["body"]  # no tool definitions in text mode
    (err,) = events(tr, "format_error")
    assert "found 2 fenced bash blocks" in err["message"]


def test_model_error_ends_the_run_with_its_status(server, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "revoked-key-0000000000")
    result, tr = run(server, tmp_path / "r")
    assert result.status == "model_error" and "authentication failed" in result.message and result.steps == 0
    assert tr[-1]["event"] == "final" and len(server.requests) == 1


def test_zero_shot_without_a_python_block_is_a_format_failure(server, tmp_path):
    server.push(Say("Here is my plan: use symmetric memory. (no code)"))
    result, tr = run(server, tmp_path / "r", mode="zero-shot")
    assert result.status == "format_error" and result.check is None and not result.correct
    assert not (tmp_path / "r" / "solution.py").exists()
    assert "zero_shot" not in json.dumps(tr[1]) and "one fenced" in tr[1]["messages"][0]["content"]


def test_extract_python_takes_the_last_block():
    text = "draft:\n```python\nx = 1\n```\nfinal:\n```python\ndef solution(x):\n    return x\n```\n"
    assert extract_python(text) == "def solution(x):\n    return x\n"
    assert extract_python("```bash\nls\n```") is None and extract_python("```python\n\n```") is None


def test_out_dir_with_a_transcript_is_refused(server, tmp_path):
    server.push(Say("", [("submit", {})]))
    run(server, tmp_path / "r")
    with pytest.raises(ConfigError, match="holds a transcript already"):
        run(server, tmp_path / "r")


def test_prompts_render_strictly_with_the_problem_and_hardware():
    import jinja2

    from eval.problem import load_problem
    from prompts import render, task_context

    hw = load_hardware("h200_2")
    ctx = task_context(load_problem("all_reduce"), hw, world_size=2, device="cuda", size=1.0, actions="tools")
    task = render("task.j2", **ctx)
    for needed in (
        "def reference(x)",
        "solution(x)",
        "394",
        "NVLink multicast",
        "--perf",
        "roofline",
        "deadlock",
        "partitioning",
        "copy engine",
        "Intra- vs inter-SM",
        "kl.load",
        (ROOT / "kernels_lib" / "README.md").read_text().strip()[:200],
    ):
        assert needed in task, needed
    # the worked example is a kernels_lib reference kernel, never one that solves this problem
    assert ctx["example"]["source"] in task and "eval/problems/all_reduce.py" not in ctx["example"]["source"]
    other = task_context(load_problem("all_gather"), hw, world_size=2, device="cuda", size=1.0, actions="text")
    assert other["example"]["path"] == "kernels_lib/examples/all_reduce_one_shot.py"
    assert "bash" in render("system.j2", **ctx) and "fresh shell" in render("system.j2", **ctx)
    cpu = render(
        "task.j2",
        **{**ctx, "device": "cpu", "size": 0.001, "check_command": "pkagent check solution.py --problem all_reduce --device cpu"},
    )
    assert "gloo" in cpu and "kl.load" not in cpu and "--device cpu" in cpu
    del ctx["hw"]
    with pytest.raises(jinja2.UndefinedError):
        render("task.j2", **ctx)


def test_cuda_run_holds_its_gpus_from_the_given_source(server, tmp_path):
    from sandbox import GpuPool

    pool = GpuPool([[0, 18, 0], [18, 0, 0], [0, 0, 0]])  # GPUs 0 and 1 joined by NVLink, 2 alone
    held = []
    server.push(Say("", [("bash", {"command": "echo visible=$CUDA_VISIBLE_DEVICES"})]), Say("", [("submit", {})]))
    spec, _, suffix = SPECS["openai"]
    cfg = make_config(FAST, problem="all_reduce", model=spec, base_url=server.url + suffix, device="cuda", world_size=2)
    real_acquire = pool.acquire

    def acquire(n, timeout=None):
        held.append(n)
        return real_acquire(n, timeout)

    pool.acquire = acquire
    result = solve(cfg, tmp_path / "r", gpus=pool)
    obs = [e["output"] for e in read(tmp_path / "r" / "transcript.jsonl") if e["event"] == "observation"]
    assert obs == ["visible=0,1\n"] and held == [2] and pool.free == {0, 1, 2}
    assert result.status == "submitted" and result.check is None  # nothing written, nothing scored


def test_cuda_without_gpus_is_a_one_line_config_error(server, tmp_path, monkeypatch):
    from sandbox import GpuPool

    monkeypatch.setattr(GpuPool, "from_machine", classmethod(lambda cls: GpuPool([])))
    spec, _, suffix = SPECS["openai"]
    cfg = make_config(FAST, problem="all_reduce", model=spec, base_url=server.url + suffix, device="cuda")
    with pytest.raises(ConfigError, match="has 0 GPUs .* use --device cpu"):
        solve(cfg, tmp_path / "r")
    assert not (tmp_path / "r").exists()


def test_transcript_redacts_key_values_and_skips_a_torn_last_line(tmp_path, monkeypatch):
    from agent.transcript import Transcript

    monkeypatch.setenv("SOME_PROVIDER_API_KEY", "sk-live-abcdef123456")
    with Transcript(tmp_path / "t.jsonl") as tr:
        tr.write("observation", output="the key is sk-live-abcdef123456, see")
    with open(tmp_path / "t.jsonl", "a") as f:
        f.write('{"event": "response", "t": 1.0, "reply": {"te')  # a write cut short by a crash
    text = (tmp_path / "t.jsonl").read_text()
    assert "sk-live-abcdef123456" not in text and "the key is [redacted], see" in text
    assert [e["event"] for e in read(tmp_path / "t.jsonl")] == ["observation"]
