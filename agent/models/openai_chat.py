"""`openai:MODEL` and `openai-compatible:MODEL` (vLLM, SGLang, Together, OpenRouter ...): the
Chat Completions API through the official openai SDK."""

from __future__ import annotations

import json
import os
from typing import Any

from agent.models import Client, Reply, ToolCall, TransientError, Usage, error_message, status_error
from configs import ConfigError


def to_openai(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for m in messages:
        if m["role"] == "assistant":
            msg: dict[str, Any] = {"role": "assistant", "content": m.get("content") or None}
            if m.get("tool_calls"):
                msg["tool_calls"] = [
                    {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": json.dumps(c["arguments"])}}
                    for c in m["tool_calls"]
                ]
            out.append(msg)
        elif m["role"] == "tool":
            out.append({"role": "tool", "tool_call_id": m["tool_call_id"], "content": m["content"]})
        else:
            out.append({"role": m["role"], "content": m["content"]})
    return out


def _arguments(raw: str | None) -> dict[str, Any]:
    try:
        args = json.loads(raw or "{}")
    except json.JSONDecodeError:
        return {"_unparsed": raw}
    return args if isinstance(args, dict) else {"_unparsed": raw}


class OpenAIClient(Client):
    provider = "openai"
    key_env = ("OPENAI_API_KEY",)
    max_tokens_param = "max_completion_tokens"

    def connect(self) -> None:
        import openai

        self._openai = openai
        self._client = openai.OpenAI(
            api_key=self.api_key(),
            base_url=self.base_url or os.environ.get("OPENAI_BASE_URL"),
            max_retries=0,
            timeout=self.config.request_timeout_s,
        )

    def _request(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> Reply:
        openai = self._openai
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": to_openai(messages),
            self.max_tokens_param: self.config.max_tokens,
        }
        if self.config.temperature is not None:
            kwargs["temperature"] = self.config.temperature
        if tools:
            kwargs["tools"] = [{"type": "function", "function": t} for t in tools]
        try:
            r = self._client.chat.completions.create(**kwargs)
        except openai.APIStatusError as e:
            raise status_error(self.provider, e.status_code, error_message(e), e.response.headers, self.key_env[0]) from None
        except openai.APIConnectionError as e:  # timeouts included
            raise TransientError(f"{self.provider}: {e}") from None
        except (openai.APIResponseValidationError, ValueError) as e:  # malformed body
            raise TransientError(f"{self.provider}: malformed reply: {e}") from None
        if not getattr(r, "choices", None):
            raise TransientError(f"{self.provider}: reply without choices")
        choice = r.choices[0]
        msg = choice.message
        calls = [
            ToolCall(id=c.id, name=c.function.name, arguments=_arguments(c.function.arguments))
            for c in (msg.tool_calls or [])
            if getattr(c, "function", None)
        ]
        u = r.usage
        cached = 0
        if u is not None and u.prompt_tokens_details is not None:
            cached = u.prompt_tokens_details.cached_tokens or 0
        usage = Usage(
            input_tokens=(u.prompt_tokens if u else 0) - cached,
            cached_tokens=cached,
            output_tokens=u.completion_tokens if u else 0,
        )
        return Reply(text=msg.content or "", tool_calls=calls, usage=usage, finish_reason=choice.finish_reason)


class OpenAICompatibleClient(OpenAIClient):
    """Any server that speaks Chat Completions; the base URL comes from --base-url or
    OPENAI_COMPATIBLE_BASE_URL, the key (if the server wants one) from OPENAI_COMPATIBLE_API_KEY."""

    provider = "openai-compatible"
    key_env = ("OPENAI_COMPATIBLE_API_KEY",)
    max_tokens_param = "max_tokens"

    def connect(self) -> None:
        import openai

        base_url = self.base_url or os.environ.get("OPENAI_COMPATIBLE_BASE_URL")
        if not base_url:
            raise ConfigError(f"model {self.spec}: no base URL: pass --base-url URL or set OPENAI_COMPATIBLE_BASE_URL")
        self.base_url = base_url
        self._openai = openai
        self._client = openai.OpenAI(
            api_key=os.environ.get(self.key_env[0]) or "none",
            base_url=base_url,
            max_retries=0,
            timeout=self.config.request_timeout_s,
        )
