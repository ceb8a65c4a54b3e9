"""A fake model server on loopback that speaks three providers' wire formats:

    POST /v1/chat/completions                    OpenAI chat completions (tool calls)
    POST /v1/messages                            Anthropic messages (tool use)
    POST /v1beta/models/MODEL:generateContent    Gemini generateContent (function calls)

Every request takes the next item of one script: Say (a reply, rendered in the provider's
format), Fail (an HTTP error status, optionally with Retry-After), Garbage (a 200 with a body
that is not JSON) or Slow (waits, then serves its item: a client timeout). It checks the API key
(401 when wrong) and that each request is well formed for its provider (400 when not: tool
results that do not answer the previous tool calls, roles out of order ...), as the real
services do, and records every request for the tests to inspect.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Say:
    text: str = ""
    calls: list[tuple[str, dict]] = field(default_factory=list)  # (tool name, arguments)
    input: int = 100  # uncached prompt tokens
    cached: int = 0
    cache_write: int = 0
    output: int = 20


@dataclass
class Fail:
    status: int
    retry_after: float | None = None
    message: str = "injected failure"


@dataclass
class Garbage:
    body: str = '{"id": "x", "choices": [ {"message": '


@dataclass
class Slow:
    seconds: float
    then: Any = None  # the item served after the wait (default: a plain Say)


_ERROR_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    529: "UNAVAILABLE",
}
_ANTHROPIC_TYPE = {
    400: "invalid_request_error",
    401: "authentication_error",
    429: "rate_limit_error",
    500: "api_error",
    503: "api_error",
    529: "overloaded_error",
}


class FakeModelServer:
    def __init__(self, api_key: str = "test-key-0123456789"):
        self.api_key = api_key
        self.script: deque = deque()
        self.requests: list[dict[str, Any]] = []  # {"provider", "path", "headers", "body", "answer"}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def push(self, *items: Any) -> FakeModelServer:
        self.script.extend(items)
        return self

    def __enter__(self) -> FakeModelServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    # --- one request ---------------------------------------------------------------------------

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                status, headers, body = server.answer(self.path, dict(self.headers), raw)
                data = body.encode()
                try:
                    self.send_response(status)
                    for k, v in {"content-type": "application/json", "content-length": str(len(data)), **headers}.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout test)
                    pass

        return Handler

    def answer(self, path: str, headers: dict[str, str], raw: bytes) -> tuple[int, dict[str, str], str]:
        h = {k.lower(): v for k, v in headers.items()}
        if path.startswith("/v1/chat/completions"):
            provider, key = "openai", h.get("authorization", "").removeprefix("Bearer ")
        elif path.startswith("/v1/messages"):
            provider = "anthropic"  # the SDK sends the key as x-api-key or, lately, as a bearer token
            key = h.get("x-api-key") or h.get("authorization", "").removeprefix("Bearer ")
        elif ":generateContent" in path:
            provider, key = "google", h.get("x-goog-api-key", "")
        else:
            return 404, {}, json.dumps({"error": {"message": f"no route {path}"}})
        body = json.loads(raw or b"{}")
        record = {"provider": provider, "path": path, "headers": h, "body": body, "time": time.monotonic()}
        with self._lock:
            self.requests.append(record)
            if key != self.api_key:
                item: Any = Fail(401, message="invalid API key")
            elif problem := _malformed(provider, body):
                item = Fail(400, message=f"malformed request: {problem}")
            elif self.script:
                item = self.script.popleft()
            else:
                item = Fail(400, message="fake server: the script has no more replies")
        record["answer"] = type(item).__name__
        if isinstance(item, Slow):
            time.sleep(item.seconds)
            item = item.then or Say("late")
        if isinstance(item, Garbage):
            return 200, {}, item.body
        if isinstance(item, Fail):
            return (
                item.status,
                ({"retry-after": f"{item.retry_after:g}"} if item.retry_after is not None else {}),
                _error(provider, item),
            )
        return 200, {}, json.dumps(self._render(provider, body, item))

    def _render(self, provider: str, request: dict, say: Say) -> dict[str, Any]:
        n = next(self._ids)
        if provider == "openai":
            calls = [
                {"id": f"call_{n}_{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
                for i, (name, args) in enumerate(say.calls)
            ]
            message: dict[str, Any] = {"role": "assistant", "content": say.text or None}
            if calls:
                message["tool_calls"] = calls
            return {
                "id": f"chatcmpl-{n}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": request.get("model", ""),
                "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
                "usage": {
                    "prompt_tokens": say.input + say.cached,
                    "completion_tokens": say.output,
                    "total_tokens": say.input + say.cached + say.output,
                    "prompt_tokens_details": {"cached_tokens": say.cached},
                },
            }
        if provider == "anthropic":
            content: list[dict[str, Any]] = [{"type": "text", "text": say.text}] if say.text else []
            content += [
                {"type": "tool_use", "id": f"toolu_{n}_{i}", "name": name, "input": args}
                for i, (name, args) in enumerate(say.calls)
            ]
            return {
                "id": f"msg_{n}",
                "type": "message",
                "role": "assistant",
                "model": request.get("model", ""),
                "content": content,
                "stop_reason": "tool_use" if say.calls else "end_turn",
                "stop_sequence": None,
                "usage": {
                    "input_tokens": say.input,
                    "output_tokens": say.output,
                    "cache_read_input_tokens": say.cached,
                    "cache_creation_input_tokens": say.cache_write,
                },
            }
        parts: list[dict[str, Any]] = [{"text": say.text}] if say.text else []
        parts += [{"functionCall": {"name": name, "args": args}, "thoughtSignature": "c2lnbmF0dXJl"} for name, args in say.calls]
        return {
            "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
            "usageMetadata": {
                "promptTokenCount": say.input + say.cached,
                "cachedContentTokenCount": say.cached,
                "candidatesTokenCount": say.output,
                "totalTokenCount": say.input + say.cached + say.output,
            },
            "modelVersion": "fake",
        }


def _error(provider: str, fail: Fail) -> str:
    if provider == "anthropic":
        return json.dumps(
            {"type": "error", "error": {"type": _ANTHROPIC_TYPE.get(fail.status, "api_error"), "message": fail.message}}
        )
    if provider == "google":
        return json.dumps(
            {"error": {"code": fail.status, "message": fail.message, "status": _ERROR_STATUS.get(fail.status, "UNKNOWN")}}
        )
    return json.dumps(
        {
            "error": {
                "message": fail.message,
                "type": "invalid_request_error" if fail.status < 500 else "server_error",
                "code": None,
            }
        }
    )


def _malformed(provider: str, body: dict[str, Any]) -> str | None:
    """What the real service would reject in this request, if anything (the checks that catch
    a wrong translation of the history)."""
    if provider == "openai":
        msgs = body.get("messages") or []
        pending: set[str] = set()
        for m in msgs:
            if m.get("role") == "tool":
                if m.get("tool_call_id") not in pending:
                    return f"tool message for unknown tool_call_id {m.get('tool_call_id')!r}"
                pending.discard(m["tool_call_id"])
                continue
            if pending:
                return f"tool_calls {sorted(pending)} have no tool message"
            if m.get("role") == "assistant":
                pending = {c["id"] for c in m.get("tool_calls") or []}
                for c in m.get("tool_calls") or []:
                    json.loads(c["function"]["arguments"])
        return None if msgs else "messages is empty"
    if provider == "anthropic":
        if "max_tokens" not in body:
            return "max_tokens is required"
        msgs = body.get("messages") or []
        if not msgs or msgs[0]["role"] != "user":
            return "the first message must be a user message"
        tool_uses: set[str] = set()
        for prev, m in zip([None] + msgs, msgs):
            if prev is not None and prev["role"] == m["role"]:
                return "roles must alternate between user and assistant"
            blocks = m["content"] if isinstance(m["content"], list) else [{"type": "text", "text": m["content"]}]
            if m["role"] == "user":
                results = {b["tool_use_id"] for b in blocks if b.get("type") == "tool_result"}
                if results != tool_uses:
                    return f"tool_use ids {sorted(tool_uses)} answered by tool_result ids {sorted(results)}"
                tool_uses = set()
            else:
                if any(b.get("type") == "text" and not b.get("text") for b in blocks):
                    return "text content blocks must be non-empty"
                tool_uses = {b["id"] for b in blocks if b.get("type") == "tool_use"}
        return None
    contents = body.get("contents") or []
    if not contents:
        return "contents is empty"
    calls = 0
    for c in contents:
        parts = c.get("parts") or []
        if c.get("role") == "user":
            answers = sum(1 for p in parts if "functionResponse" in p)
            if answers != calls:
                return f"{calls} function calls answered by {answers} function responses"
            calls = 0
        else:
            fc = [p for p in parts if "functionCall" in p]
            if any(p.get("thoughtSignature") != "c2lnbmF0dXJl" for p in fc):
                return "function call part without its thought signature"
            calls = len(fc)
    return None
