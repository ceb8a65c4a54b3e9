"""In-process doubles for fast tests of the agent loop: a deterministic model that plays a list
of replies (and records what it was sent), and a sandbox that answers commands from a function
and keeps its files in a dict. Nothing here starts a process or opens a socket."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agent.models import Client, ModelError, Reply, ToolCall, Usage
from configs import AgentConfig, ModelsConfig
from sandbox import ExecResult


def bash(command: str, text: str = "") -> Reply:
    """A reply that calls the bash tool once."""
    return Reply(text=text, tool_calls=[ToolCall(id="b", name="bash", arguments={"command": command})])


def submit(text: str = "") -> Reply:
    return Reply(text=text, tool_calls=[ToolCall(id="s", name="submit")])


class ScriptedModel(Client):
    """Plays `replies` in order (a ModelError in the list is raised at its turn); a turn past the
    end is a test failure. Each reply costs `cost_per_reply` dollars. `sent` holds a copy of the
    messages of every request."""

    provider = "scripted"

    def __init__(
        self,
        replies: list[Reply | ModelError],
        config: AgentConfig | None = None,
        actions: str | None = None,
        cost_per_reply: float = 0.0,
    ):
        super().__init__("m", config or AgentConfig(retry_wait_s=0), prices=ModelsConfig())
        self.replies, self.actions, self.cost_per_reply = list(replies), actions, cost_per_reply
        self.usage = Usage(input_tokens=10, output_tokens=5)
        self.sent: list[list[dict[str, Any]]] = []

    def _request(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> Reply:
        self.sent.append([dict(m) for m in messages])
        assert self.replies, "the model was asked for more turns than the script has"
        reply = self.replies.pop(0)
        if isinstance(reply, ModelError):
            raise reply
        return reply.model_copy(update={"usage": self.usage})

    def cost(self, usage: Usage) -> float:
        return self.cost_per_reply


class MemorySandbox:
    """A sandbox whose commands are answered by `respond(command, files) -> (output, exit code)`;
    files live in a dict. Every command is recorded in `commands`."""

    def __init__(self, respond: Callable[[str, dict[str, bytes]], tuple[str, int]] | None = None):
        self.respond = respond or (lambda command, files: ("", 0))
        self.files: dict[str, bytes] = {}
        self.commands: list[str] = []
        self.closed = False

    def execute(self, command: str, timeout: float | None = None) -> ExecResult:
        self.commands.append(command)
        output, code = self.respond(command, self.files)
        return ExecResult(output=output, exit_code=code, timed_out=code == 124, duration_s=0.0)

    def put(self, path: str, data: bytes | str) -> None:
        self.files[path] = data.encode() if isinstance(data, str) else data

    def get(self, path: str) -> bytes:
        try:
            return self.files[path]
        except KeyError:
            raise FileNotFoundError(path) from None

    def close(self) -> None:
        self.closed = True

    def __enter__(self) -> MemorySandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
