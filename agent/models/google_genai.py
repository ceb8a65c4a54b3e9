"""`google:MODEL`: Gemini's generateContent through the official google-genai SDK.

Gemini wants its own parts echoed back (thought signatures ride on function calls), so a
reply keeps them as provider_data and the next request sends them unchanged."""

from __future__ import annotations

import json
from typing import Any

from agent.models import Client, Reply, ToolCall, TransientError, Usage, status_error


def _transport_errors() -> tuple[type[BaseException], ...]:
    """The HTTP layer's transport errors (google-genai runs on httpx or its fork httpx2)."""
    found: list[type[BaseException]] = [TimeoutError, ConnectionError]
    for name in ("httpx", "httpx2"):
        try:
            found.append(__import__(name).TransportError)
        except (ImportError, AttributeError):
            pass
    return tuple(found)


class GoogleClient(Client):
    provider = "google"
    key_env = ("GEMINI_API_KEY", "GOOGLE_API_KEY")

    def connect(self) -> None:
        from google import genai
        from google.genai import errors, types

        self._types, self._errors = types, errors
        options = types.HttpOptions(
            base_url=self.base_url,
            timeout=int(self.config.request_timeout_s * 1000),
            retry_options=types.HttpRetryOptions(attempts=1),
        )
        self._client = genai.Client(api_key=self.api_key(), http_options=options)

    def _contents(self, messages: list[dict[str, Any]]) -> tuple[str, list[Any]]:
        types = self._types
        system: list[str] = []
        contents: list[Any] = []

        def add(role: str, part: Any) -> None:
            if contents and contents[-1].role == role:
                contents[-1].parts.append(part)
            else:
                contents.append(types.Content(role=role, parts=[part]))

        for m in messages:
            if m["role"] == "system":
                system.append(m["content"])
            elif m["role"] == "user":
                add("user", types.Part(text=m["content"]))
            elif m["role"] == "tool":
                add(
                    "user",
                    types.Part(function_response=types.FunctionResponse(name=m["name"], response={"output": m["content"]})),
                )
            elif isinstance(m.get("provider_data"), dict) and "google_parts" in m["provider_data"]:
                for p in m["provider_data"]["google_parts"]:
                    add("model", types.Part.model_validate_json(json.dumps(p)))
            else:
                if m.get("content"):
                    add("model", types.Part(text=m["content"]))
                for c in m.get("tool_calls", []):
                    add("model", types.Part(function_call=types.FunctionCall(name=c["name"], args=c["arguments"])))
        return "\n\n".join(system), contents

    def _request(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> Reply:
        types, errors = self._types, self._errors
        system, contents = self._contents(messages)
        config = types.GenerateContentConfig(
            system_instruction=system or None,
            max_output_tokens=self.config.max_tokens,
            temperature=self.config.temperature,
            automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
            tools=[
                types.Tool(
                    function_declarations=[
                        types.FunctionDeclaration(
                            name=t["name"], description=t["description"], parameters_json_schema=t["parameters"]
                        )
                        for t in tools
                    ]
                )
            ]
            if tools
            else None,
        )
        try:
            r = self._client.models.generate_content(model=self.model, contents=contents, config=config)
        except errors.APIError as e:
            headers = getattr(getattr(e, "response", None), "headers", None)
            raise status_error(self.provider, e.code or 500, e.message or str(e), headers, " or ".join(self.key_env)) from None
        except ValueError as e:  # malformed body (json.JSONDecodeError is a ValueError)
            raise TransientError(f"{self.provider}: malformed reply: {e}") from None
        except _transport_errors() as e:  # timeouts, refused or dropped connections
            raise TransientError(f"{self.provider}: {type(e).__name__}: {e}") from None
        cand = (r.candidates or [None])[0]
        parts = list(cand.content.parts or []) if cand is not None and cand.content is not None else []
        if cand is None:
            raise TransientError(f"{self.provider}: reply without candidates")
        text = "".join(p.text for p in parts if p.text and not p.thought)
        calls = [
            ToolCall(
                id=p.function_call.id or f"call_{i}", name=p.function_call.name or "", arguments=dict(p.function_call.args or {})
            )
            for i, p in enumerate(parts)
            if p.function_call is not None
        ]
        u = r.usage_metadata
        cached = (u.cached_content_token_count or 0) if u else 0
        usage = Usage(
            input_tokens=((u.prompt_token_count or 0) - cached) if u else 0,
            cached_tokens=cached,
            output_tokens=((u.candidates_token_count or 0) + (u.thoughts_token_count or 0)) if u else 0,
        )
        finish = cand.finish_reason.value if cand.finish_reason is not None and hasattr(cand.finish_reason, "value") else None
        data = {"google_parts": [json.loads(p.model_dump_json(exclude_none=True)) for p in parts]}
        return Reply(text=text, tool_calls=calls, usage=usage, finish_reason=finish, provider_data=data)
