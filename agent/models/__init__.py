"""Model clients: one small interface over the providers.

    model = get_model("anthropic:claude-sonnet-4-6", config)
    reply = model.query(messages, tools=TOOLS)      # -> Reply(text, tool_calls, usage, cost_usd)

Messages are plain dicts in one provider-neutral shape; each client translates them:

    {"role": "system" | "user", "content": str}
    {"role": "assistant", "content": str, "tool_calls": [{"id", "name", "arguments": dict}],
     "provider_data": ...}            # opaque, what the provider needs echoed back
    {"role": "tool", "tool_call_id": str, "name": str, "content": str}

Transient errors (429 honouring Retry-After, 408, overload 503/529, other 5xx, timeouts, lost
connections, malformed replies) are retried with exponential backoff and jitter (tenacity);
authentication, bad-request and context-length errors raise ModelError at once. Each SDK is
imported only by the client that needs it. API keys are read from the environment by the
client and kept there: nothing here writes them anywhere.
"""

from __future__ import annotations

import email.utils
import os
import random
import time
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, Field
from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt

from configs import AgentConfig, ConfigError, ModelsConfig, load_models

PROVIDERS = ("openai", "anthropic", "google", "openai-compatible", "replay")

# The two tools of the agent, in a neutral JSON-schema form each client converts.
TOOLS: list[dict[str, Any]] = [
    {
        "name": "bash",
        "description": "Run one bash command in the work directory (a fresh shell each time) and "
        "return its combined stdout and stderr and its exit code.",
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "string", "description": "the bash command line or script"}},
            "required": ["command"],
        },
    },
    {
        "name": "submit",
        "description": "End the task: solution.py in the work directory, as it is now, is scored.",
        "parameters": {"type": "object", "properties": {}},
    },
]


class ToolCall(BaseModel):
    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class Usage(BaseModel):
    """Tokens of one or more requests. input_tokens excludes the cached and cache-write ones."""

    input_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    output_tokens: int = 0  # reasoning tokens included

    def __add__(self, other: Usage) -> Usage:
        return Usage(**{k: getattr(self, k) + getattr(other, k) for k in Usage.model_fields})

    @property
    def prompt_tokens(self) -> int:
        return self.input_tokens + self.cached_tokens + self.cache_write_tokens


class Reply(BaseModel):
    text: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    cost_usd: float = 0.0
    finish_reason: str | None = None
    provider_data: Any = None

    def message(self) -> dict[str, Any]:
        """The assistant message to append to the history."""
        msg: dict[str, Any] = {"role": "assistant", "content": self.text}
        if self.tool_calls:
            msg["tool_calls"] = [c.model_dump() for c in self.tool_calls]
        if self.provider_data is not None:
            msg["provider_data"] = self.provider_data
        return msg


class ModelError(Exception):
    """A model request that cannot succeed; str() is one line for the user.

    kind: auth | bad_request | context_length | unavailable (retries exhausted) | replay."""

    def __init__(self, message: str, kind: str = "bad_request"):
        super().__init__(message)
        self.kind = kind


class TransientError(Exception):
    """A failure worth retrying; retry_after is the server's Retry-After in seconds, if any."""

    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


_CONTEXT_WORDS = (
    "context length",
    "context_length",
    "context window",
    "prompt is too long",
    "too many tokens",
    "maximum context",
    "input token count",
    "exceeds the maximum number of tokens",
)


def retry_after(headers: Any) -> float | None:
    """Seconds from `retry-after-ms` or `Retry-After` (seconds or an HTTP date), if present."""
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    try:
        if ms is not None:
            return max(0.0, float(ms) / 1000)
    except ValueError:
        pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        when = email.utils.parsedate_to_datetime(value) if value else None
        return max(0.0, when.timestamp() - time.time()) if when else None


def error_message(exc: Exception) -> str:
    """The service's own words from an SDK error: error.message of the body where there is one."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            return inner["message"]
    return str(getattr(exc, "message", None) or exc)


def status_error(provider: str, status: int, message: str, headers: Any = None, key_env: str = "") -> Exception:
    """The exception for an HTTP error status: TransientError to retry, ModelError to stop."""
    message = " ".join(str(message).split())[:500]
    if status in (408, 409, 429) or status >= 500:
        return TransientError(f"{provider}: HTTP {status}: {message}", retry_after(headers))
    if status in (401, 403):
        hint = f"; check {key_env}" if key_env else ""
        return ModelError(f"{provider}: authentication failed (HTTP {status}){hint}: {message}", "auth")
    if any(w in message.lower() for w in _CONTEXT_WORDS):
        return ModelError(f"{provider}: context length exceeded (HTTP {status}): {message}", "context_length")
    return ModelError(f"{provider}: request rejected (HTTP {status}): {message}", "bad_request")


class _Backoff:
    """Exponential backoff with full jitter; the server's Retry-After wins when it gives one."""

    def __init__(self, first: float, longest: float):
        self.first, self.longest = first, longest

    def __call__(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        after = getattr(exc, "retry_after", None)
        if after is not None:
            return min(after, self.longest)
        ceiling = min(self.longest, self.first * 2 ** (state.attempt_number - 1))
        return random.uniform(ceiling / 2, ceiling)


class Client:
    """One provider's client. Subclasses implement _request(messages, tools) -> Reply (without
    cost), raising TransientError or ModelError."""

    provider = ""
    key_env: tuple[str, ...] = ()
    actions: str | None = None  # an action format the client requires ("tools" or "text"), if any

    def __init__(self, model: str, config: AgentConfig, prices: ModelsConfig | None = None, base_url: str | None = None):
        self.model = model
        self.config = config
        self.base_url = base_url
        prices = prices if prices is not None else load_models()
        self.price = prices.prices.get(model)
        self.on_retry: Callable[[int, float, str], None] | None = None

    @property
    def spec(self) -> str:
        return f"{self.provider}:{self.model}"

    def api_key(self) -> str:
        for name in self.key_env:
            if os.environ.get(name):
                return os.environ[name]
        raise ConfigError(f"model {self.spec}: no API key: set {' or '.join(self.key_env)} in the environment")

    def cost(self, usage: Usage) -> float:
        p = self.price
        if p is None:
            return 0.0
        cached = p.cached_input if p.cached_input is not None else p.input
        write = p.cache_write if p.cache_write is not None else p.input
        return (
            usage.input_tokens * p.input
            + usage.cached_tokens * cached
            + usage.cache_write_tokens * write
            + usage.output_tokens * p.output
        ) / 1e6

    def query(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> Reply:
        def before_sleep(state: RetryCallState) -> None:
            if self.on_retry:
                wait = state.next_action.sleep if state.next_action else 0.0
                self.on_retry(state.attempt_number, wait, str(state.outcome.exception()))

        retrying = Retrying(
            stop=stop_after_attempt(self.config.max_retries + 1),
            wait=_Backoff(self.config.retry_wait_s, self.config.retry_max_wait_s),
            retry=retry_if_exception_type(TransientError),
            before_sleep=before_sleep,
            reraise=True,
        )
        try:
            reply = retrying(self._request, messages, tools)
        except TransientError as e:
            raise ModelError(f"{e} (gave up after {self.config.max_retries + 1} attempts)", "unavailable") from None
        reply.cost_usd = self.cost(reply.usage)
        return reply

    def _request(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> Reply:
        raise NotImplementedError


def parse_spec(spec: str) -> tuple[str, str]:
    provider, sep, name = spec.partition(":")
    if not sep or not name:
        raise ConfigError(f"model {spec!r}: expected PROVIDER:MODEL, with PROVIDER one of {', '.join(PROVIDERS)}")
    if provider not in PROVIDERS:
        raise ConfigError(f"model {spec!r}: unknown provider {provider!r} (one of {', '.join(PROVIDERS)})")
    return provider, name


def get_model(
    spec: str, config: AgentConfig | None = None, *, base_url: str | None = None, prices: ModelsConfig | None = None
) -> Client:
    """The client for `provider:model`; raises ConfigError for a bad spec or a missing key
    (checked here, before any work starts)."""
    provider, name = parse_spec(spec)
    config = config or AgentConfig()
    if provider == "replay":
        from agent.models.replay import ReplayClient

        return ReplayClient(name, config)
    if provider in ("openai", "openai-compatible"):
        from agent.models.openai_chat import OpenAIClient, OpenAICompatibleClient

        cls = OpenAIClient if provider == "openai" else OpenAICompatibleClient
    elif provider == "anthropic":
        from agent.models.anthropic_messages import AnthropicClient as cls
    else:
        from agent.models.google_genai import GoogleClient as cls
    client = cls(name, config, prices, base_url)
    client.connect()
    return client
