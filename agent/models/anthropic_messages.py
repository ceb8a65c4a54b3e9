"""`anthropic:MODEL`: the Messages API through the official anthropic SDK, with prompt caching
of the system prompt and the growing history."""

from __future__ import annotations

import copy
from typing import Any

from agent.models import Client, Reply, ToolCall, TransientError, Usage, error_message, status_error


def to_anthropic(messages: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(system blocks, messages); tool results join the user turn that follows them."""
    system: list[dict[str, Any]] = []
    out: list[dict[str, Any]] = []

    def user_blocks() -> list[dict[str, Any]]:
        if not out or out[-1]["role"] != "user":
            out.append({"role": "user", "content": []})
        return out[-1]["content"]

    for m in messages:
        if m["role"] == "system":
            system.append({"type": "text", "text": m["content"]})
        elif m["role"] == "user":
            user_blocks().append({"type": "text", "text": m["content"]})
        elif m["role"] == "tool":
            user_blocks().append(
                {"type": "tool_result", "tool_use_id": m["tool_call_id"], "content": m["content"] or "(no output)"}
            )
        else:
            blocks: list[dict[str, Any]] = [{"type": "text", "text": m["content"]}] if m.get("content") else []
            blocks += [
                {"type": "tool_use", "id": c["id"], "name": c["name"], "input": c["arguments"]} for c in m.get("tool_calls", [])
            ]
            out.append({"role": "assistant", "content": blocks or [{"type": "text", "text": "(empty)"}]})
    # Cache breakpoints: the system prompt and the end of the history (read back on the next step).
    if system:
        system[-1]["cache_control"] = {"type": "ephemeral"}
    if out and out[-1]["content"]:
        out[-1]["content"][-1]["cache_control"] = {"type": "ephemeral"}
    return system, out


class AnthropicClient(Client):
    provider = "anthropic"
    key_env = ("ANTHROPIC_API_KEY",)

    def connect(self) -> None:
        import anthropic

        self._anthropic = anthropic
        self._client = anthropic.Anthropic(
            api_key=self.api_key(), base_url=self.base_url, max_retries=0, timeout=self.config.request_timeout_s
        )

    def _request(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> Reply:
        anthropic = self._anthropic
        system, msgs = to_anthropic(copy.deepcopy(messages))
        kwargs: dict[str, Any] = {"model": self.model, "messages": msgs, "max_tokens": self.config.max_tokens}
        if system:
            kwargs["system"] = system
        if self.config.temperature is not None:
            kwargs["temperature"] = min(self.config.temperature, 1.0)
        if tools:
            kwargs["tools"] = [
                {"name": t["name"], "description": t["description"], "input_schema": t["parameters"]} for t in tools
            ]
        try:
            r = self._client.messages.create(**kwargs)
        except anthropic.APIStatusError as e:
            raise status_error(self.provider, e.status_code, error_message(e), e.response.headers, self.key_env[0]) from None
        except anthropic.APIConnectionError as e:  # timeouts included
            raise TransientError(f"{self.provider}: {e}") from None
        except (anthropic.APIResponseValidationError, ValueError) as e:
            raise TransientError(f"{self.provider}: malformed reply: {e}") from None
        text = "".join(b.text for b in r.content if b.type == "text")
        calls = [
            ToolCall(id=b.id, name=b.name, arguments=b.input if isinstance(b.input, dict) else {"_unparsed": b.input})
            for b in r.content
            if b.type == "tool_use"
        ]
        u = r.usage
        usage = Usage(
            input_tokens=u.input_tokens,
            output_tokens=u.output_tokens,
            cached_tokens=getattr(u, "cache_read_input_tokens", None) or 0,
            cache_write_tokens=getattr(u, "cache_creation_input_tokens", None) or 0,
        )
        return Reply(text=text, tool_calls=calls, usage=usage, finish_reason=r.stop_reason)
