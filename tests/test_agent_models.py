"""Model clients against the fake model server, through the real SDKs: retries (and their
end), errors that must not be retried, token accounting and cost, bad specs and missing keys."""

import time

import pytest
from fakes import KEY_VARIABLES, SPECS
from fakes.model_server import Fail, FakeModelServer, Garbage, Say, Slow

from agent.models import TOOLS, ModelError, Usage, get_model, parse_spec, retry_after
from configs import AgentConfig, ConfigError, ModelPrice, ModelsConfig, load_models
from configs.errors import InputFileError

FAST = AgentConfig(max_retries=6, retry_wait_s=0.01, retry_max_wait_s=5, request_timeout_s=1.0)
TASK = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "List the files."}]


@pytest.fixture
def server(monkeypatch):
    for name in KEY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    with FakeModelServer() as srv:
        for _, var, _ in SPECS.values():
            monkeypatch.setenv(var, srv.api_key)
        yield srv


def client(server, provider, config=FAST, prices=None):
    spec, _, suffix = SPECS[provider]
    return get_model(spec, config, base_url=server.url + suffix, prices=prices)


@pytest.mark.parametrize("provider", SPECS)
def test_transient_errors_are_retried_until_a_reply(server, provider):
    model = client(server, provider)
    retries = []
    model.on_retry = lambda n, wait, err: retries.append((n, wait, err))
    server.push(
        Fail(429, retry_after=0.4),
        Fail(500),
        Fail(529),
        Fail(503),
        Garbage(),
        Slow(2.0),
        Say("ok", [("bash", {"command": "ls"})]),
    )
    reply = model.query(TASK, TOOLS)
    assert [c.name for c in reply.tool_calls] == ["bash"] and reply.tool_calls[0].arguments == {"command": "ls"}
    assert [r["answer"] for r in server.requests] == ["Fail", "Fail", "Fail", "Fail", "Garbage", "Slow", "Say"]
    assert len(retries) == 6
    assert "429" in retries[0][2] and retries[0][1] == pytest.approx(0.4)  # Retry-After honoured
    assert server.requests[1]["time"] - server.requests[0]["time"] >= 0.35
    assert "529" in retries[2][2] and "malformed" in retries[4][2].lower()


@pytest.mark.parametrize("provider", ["openai", "anthropic", "google"])
def test_retries_stop_after_the_limit(server, provider):
    model = client(server, provider, FAST.model_copy(update={"max_retries": 2}))
    server.push(*[Fail(500)] * 5)
    with pytest.raises(ModelError) as err:
        model.query(TASK, TOOLS)
    assert err.value.kind == "unavailable" and "3 attempts" in str(err.value)
    assert len(server.requests) == 3 and len(server.script) == 2


@pytest.mark.parametrize("provider", SPECS)
def test_auth_error_fails_at_once(server, provider, monkeypatch):
    spec, var, _ = SPECS[provider]
    monkeypatch.setenv(var, "wrong-key-but-long-enough")
    model = client(server, provider)
    server.push(Say("never served"))
    with pytest.raises(ModelError) as err:
        model.query(TASK, TOOLS)
    assert err.value.kind == "auth" and "401" in str(err.value) and var in str(err.value)
    assert len(server.requests) == 1 and len(server.script) == 1
    assert "wrong-key" not in str(err.value)


@pytest.mark.parametrize("provider", ["openai", "anthropic", "google"])
def test_bad_request_and_context_length_fail_at_once(server, provider):
    model = client(server, provider)
    server.push(Fail(400, message="Unsupported parameter: 'foo'"))
    with pytest.raises(ModelError) as err:
        model.query(TASK, TOOLS)
    assert err.value.kind == "bad_request" and "Unsupported parameter" in str(err.value)
    server.push(Fail(400, message="This model's maximum context length is 128000 tokens"))
    with pytest.raises(ModelError) as err:
        model.query(TASK, TOOLS)
    assert err.value.kind == "context_length"
    assert len(server.requests) == 2


@pytest.mark.parametrize("provider", SPECS)
def test_usage_and_cost_count_cached_tokens(server, provider):
    price = ModelPrice(input=2.0, cached_input=0.5, cache_write=2.5, output=8.0)
    spec = SPECS[provider][0]
    model = client(server, provider, prices=ModelsConfig(prices={spec.split(":", 1)[1]: price}))
    server.push(Say("a", input=1000, cached=4000, cache_write=300 if provider == "anthropic" else 0, output=250))
    reply = model.query(TASK, TOOLS)
    write = 300 if provider == "anthropic" else 0
    assert reply.usage == Usage(input_tokens=1000, cached_tokens=4000, cache_write_tokens=write, output_tokens=250)
    assert reply.cost_usd == pytest.approx((1000 * 2.0 + 4000 * 0.5 + write * 2.5 + 250 * 8.0) / 1e6)


def test_history_with_tool_results_is_well_formed_for_each_provider(server):
    """Two tool calls in one reply, both answered; the fake server rejects (400) any history a
    real service would reject, so passing means the translation is right."""
    for provider in SPECS:
        model = client(server, provider)
        server.push(Say("two", [("bash", {"command": "ls"}), ("bash", {"command": "pwd"})]), Say("done"))
        reply = model.query(TASK, TOOLS)
        history = (
            TASK
            + [reply.message()]
            + [
                {"role": "tool", "tool_call_id": c.id, "name": c.name, "content": f"out {i}"}
                for i, c in enumerate(reply.tool_calls)
            ]
        )
        assert model.query(history, TOOLS).text == "done"


def test_prices_file_is_valid_and_priced_models_count():
    prices = load_models().prices
    assert prices["gpt-5"].cached_input < prices["gpt-5"].input
    model = get_model("replay:examples/all_reduce_cpu/transcript.jsonl")
    assert model.cost(Usage(input_tokens=10**6, output_tokens=10**6)) == 0.0  # replays cost nothing


def test_bad_specs_and_missing_keys_are_one_line_config_errors(monkeypatch):
    for name in KEY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    for spec, words in [("gpt-5", "expected PROVIDER:MODEL"), ("foo:bar", "unknown provider 'foo'"), ("openai:", "expected")]:
        with pytest.raises(ConfigError, match=words) as err:
            parse_spec(spec)
        assert "\n" not in str(err.value)
    for provider, (spec, var, _) in SPECS.items():
        if provider == "openai-compatible":
            continue
        with pytest.raises(ConfigError, match=f"no API key: set {var}"):
            get_model(spec)
    with pytest.raises(ConfigError, match="no base URL"):
        get_model("openai-compatible:m")
    with pytest.raises(InputFileError, match="transcript not found"):  # a file the user named: exit 2 like a config error
        get_model("replay:/nonexistent/transcript.jsonl")


def test_retry_after_forms():
    assert retry_after({"retry-after": "3"}) == 3.0
    assert retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    future = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(time.time() + 30))
    assert 25 <= retry_after({"retry-after": future}) <= 31
    assert retry_after({}) is None and retry_after(None) is None


def test_sdks_are_imported_only_by_the_client_that_needs_them():
    import subprocess
    import sys

    code = (
        "import sys, agent.cli, agent.solve, agent.loop; from agent.models import get_model; "
        "before = {m.split('.')[0] for m in sys.modules}; get_model('anthropic:claude-haiku-4-5'); "
        "after = {m.split('.')[0] for m in sys.modules}; "
        "print(sorted(p for p in ('openai', 'anthropic', 'google') if p in before), "
        "sorted(p for p in ('openai', 'anthropic', 'google') if p in after))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={"ANTHROPIC_API_KEY": "sk-ant-test-000000", "PATH": "/usr/bin:/bin"},
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[] ['anthropic']"
