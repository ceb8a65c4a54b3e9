"""The agent loop on its own, fast: a deterministic model and an in-memory sandbox (tests/fakes/memory.py),
no process, no socket, no checker. What ends a run and with which status, what the model is
told, what the transcript records. The same behaviour through solve(), the real sandbox and
the checker is in test_agent_loop.py and test_agent_e2e.py."""

import json

import pytest
from fakes.memory import MemorySandbox, ScriptedModel, bash, submit

from agent.loop import Agent, last_json, observation
from agent.models import ModelError, Reply, ToolCall
from agent.transcript import Transcript, read
from configs import AgentConfig


def run(tmp_path, replies, respond=None, actions=None, cost_per_reply=0.0, **limits):
    config = AgentConfig(retry_wait_s=0, **limits)
    model = ScriptedModel(replies, config, actions=actions, cost_per_reply=cost_per_reply)
    box = MemorySandbox(respond)
    with Transcript(tmp_path / "t.jsonl") as tr:
        outcome = Agent(model, box, config, tr, output_limit=200).run("system", "task")
    return outcome, model, box, read(tmp_path / "t.jsonl")


def events(transcript, kind):
    return [e for e in transcript if e["event"] == kind]


def test_commands_run_in_order_and_their_results_go_back_to_the_model(tmp_path):
    outcome, model, box, tr = run(
        tmp_path, [bash("echo hi"), bash("false"), submit()], respond=lambda c, files: ("hi\n", 0) if c == "echo hi" else ("", 1)
    )
    assert (outcome.status, outcome.steps) == ("submitted", 3)
    assert box.commands == ["echo hi", "false"]
    # the second request carries the first command's result as the tool message answering its call
    tool = model.sent[1][-1]
    assert tool["role"] == "tool" and tool["tool_call_id"] == "b" and tool["content"] == "exit code 0\nhi\n"
    assert model.sent[2][-1]["content"] == "exit code 1\n(no output)"
    assert [e["command"] for e in events(tr, "action") if e["tool"] == "bash"] == ["echo hi", "false"]
    assert [e["exit_code"] for e in events(tr, "observation")] == [0, 1]
    assert outcome.usage.input_tokens == 30 and outcome.usage.output_tokens == 15


def test_step_limit_counts_model_calls(tmp_path):
    outcome, model, box, _ = run(tmp_path, [bash("ls")] * 3, step_limit=3)
    assert outcome.status == "step_limit" and outcome.steps == 3 and len(box.commands) == 3 and not model.replies


def test_cost_limit_stops_before_the_next_call(tmp_path):
    outcome, model, _, _ = run(tmp_path, [bash("ls")] * 5, cost_per_reply=0.4, cost_limit_usd=1.0)
    assert outcome.status == "cost_limit" and outcome.steps == 3 and outcome.cost_usd == pytest.approx(1.2)
    assert len(model.replies) == 2  # never asked again once over the limit


def test_zero_cost_limit_means_no_limit(tmp_path):
    outcome, *_ = run(tmp_path, [bash("ls")] * 4 + [submit()], cost_per_reply=10.0, cost_limit_usd=0)
    assert outcome.status == "submitted" and outcome.cost_usd == 50.0


def test_wall_time_limit(tmp_path):
    outcome, model, _, _ = run(tmp_path, [submit()], wall_time_s=1e-9)
    assert outcome.status == "time_limit" and outcome.steps == 0 and model.sent == []


def test_format_errors_are_told_to_the_model_and_end_the_run_when_repeated(tmp_path):
    outcome, model, box, tr = run(tmp_path, [Reply(text="thinking")] * 3, max_format_errors=3)
    assert outcome.status == "format_error" and outcome.steps == 3 and box.commands == []
    told = model.sent[1][-1]
    assert told["role"] == "user" and told["content"].startswith("Format error: no tool call")
    assert [e["count"] for e in events(tr, "format_error")] == [1, 2, 3]


def test_a_valid_action_resets_the_format_error_count(tmp_path):
    replies = [Reply(text="a"), Reply(text="b"), bash("ls"), Reply(text="c"), Reply(text="d"), submit()]
    outcome, *_ = run(tmp_path, replies, max_format_errors=3)
    assert outcome.status == "submitted" and outcome.steps == 6


def test_an_unknown_tool_and_a_bad_argument_get_an_error_result_each(tmp_path):
    reply = Reply(
        tool_calls=[
            ToolCall(id="x", name="python", arguments={}),
            ToolCall(id="y", name="bash", arguments={"command": 3}),
            ToolCall(id="z", name="bash", arguments={"command": "ls"}),
        ]
    )
    outcome, model, box, tr = run(tmp_path, [reply, submit()])
    results = {m["tool_call_id"]: m["content"] for m in model.sent[1] if m["role"] == "tool"}
    assert results["x"] == "Error: unknown tool 'python': the tools are bash and submit"
    assert results["y"].startswith("Error: the bash tool needs a non-empty string")
    assert results["z"] == "exit code 0\n(no output)" and box.commands == ["ls"]  # the valid call still ran
    assert model.sent[1][-1]["role"] == "tool"  # the errors travel in the tool results, not in an extra message
    assert outcome.status == "submitted" and len(events(tr, "format_error")) == 1


def test_text_actions_need_exactly_one_bash_block(tmp_path):
    replies = [
        Reply(text="```bash\nls\n```"),
        Reply(text="```bash\nls\n```\n```bash\npwd\n```"),
        Reply(text="done\n```bash\nsubmit\n```"),
    ]
    outcome, model, box, tr = run(tmp_path, replies, actions="text")
    assert outcome.status == "submitted" and box.commands == ["ls"]
    assert model.sent[1][-1] == {"role": "user", "content": "exit code 0\n(no output)"}
    assert "found 2 fenced bash blocks" in model.sent[2][-1]["content"]


@pytest.mark.parametrize(
    "kind, status", [("context_length", "context_length"), ("auth", "model_error"), ("unavailable", "model_error")]
)
def test_a_model_error_ends_the_run_with_its_status(tmp_path, kind, status):
    outcome, *_ = run(tmp_path, [bash("ls"), ModelError("the service says no", kind)])
    assert outcome.status == status and outcome.message == "the service says no" and outcome.steps == 1


def test_the_agents_own_checks_are_recorded(tmp_path):
    result = {"status": "incorrect", "ok": False}
    outcome, _, _, tr = run(
        tmp_path,
        [bash("pkagent check solution.py --problem all_reduce"), bash("echo {}"), submit()],
        respond=lambda c, files: ("building\n" + json.dumps(result) + "\n", 1),
    )
    assert [e["result"] for e in events(tr, "check")] == [result]  # `echo {}` is not a check
    assert all(e["source"] == "agent" for e in events(tr, "check"))


def test_long_output_is_cut_in_the_middle():
    text = observation("a" * 300 + "b" * 300, 0, False, 200)
    assert text.startswith("exit code 0\n" + "a" * 100) and text.endswith("b" * 100)
    assert "[400 characters cut]" in text
    assert observation("x", 124, True, 200) == "exit code 124 (timed out: the command was killed)\nx"


def test_last_json_takes_the_last_json_line():
    assert last_json('{"a": 1}\nlog\n{"status": "correct"}\n') == {"status": "correct"}
    assert last_json("no json here") is None
    assert last_json("{not json") is None
