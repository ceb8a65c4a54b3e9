"""The agent: a linear history of messages, one model call per step, the model's bash commands
run in the sandbox, until it submits or a limit ends the sample.

Control flow is by named exceptions: Submitted, LimitExceeded (step_limit, cost_limit,
time_limit, format_error) and FormatError (the reply had no valid action; the model is told,
and too many in a row end the sample). A ModelError (auth, bad request, context length,
retries exhausted) ends it too. The caller scores solution.py afterwards, outside the sandbox.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from typing import Any, Literal

from agent.models import TOOLS, Client, ModelError, Reply, Usage
from agent.transcript import Transcript
from configs import AgentConfig

BASH_BLOCK = re.compile(r"```(?:bash|sh|shell)?[ \t]*\n(.*?)```", re.DOTALL)
CHECK_COMMAND = re.compile(r"\bpkagent\s+check\b")


class Submitted(Exception):
    """The model called submit."""


class LimitExceeded(Exception):
    """A limit ended the sample; args[0] is the status (step_limit, cost_limit, ...)."""


class FormatError(Exception):
    """The reply carried no valid action; str() is what the model is told."""


Ending = Literal[
    "submitted", "step_limit", "cost_limit", "time_limit", "format_error", "context_length", "model_error", "completed"
]  # how the model's part of a sample ended (completed: the zero-shot reply)


@dataclass
class Outcome:
    status: Ending
    message: str = ""
    steps: int = 0
    cost_usd: float = 0.0
    usage: Usage = field(default_factory=Usage)


def observation(output: str, exit_code: int, timed_out: bool, limit: int) -> str:
    """What the model sees of a command: its exit code and output, the middle cut if too long."""
    if len(output) > limit:
        half = limit // 2
        output = f"{output[:half]}\n... [{len(output) - limit} characters cut] ...\n{output[-half:]}"
    head = f"exit code {exit_code}" + (" (timed out: the command was killed)" if timed_out else "")
    return f"{head}\n{output}" if output else f"{head}\n(no output)"


def last_json(output: str) -> dict[str, Any] | None:
    """The checker's result: the last line of its output that is a JSON object."""
    for line in reversed(output.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                return None
    return None


class Agent:
    def __init__(
        self,
        model: Client,
        sandbox: Any,
        config: AgentConfig,
        transcript: Transcript,
        output_limit: int = 20000,
        command_timeout: float = 600,
    ):
        self.model, self.sandbox, self.config, self.transcript = model, sandbox, config, transcript
        self.output_limit, self.command_timeout = output_limit, command_timeout
        self.actions = model.actions or config.actions
        self.messages: list[dict[str, Any]] = []
        self.steps, self.cost, self.usage, self.format_errors = 0, 0.0, Usage(), 0
        self.start = time.monotonic()
        model.on_retry = lambda n, wait, err: transcript.write("retry", attempt=n, wait_s=round(wait, 3), message=err)

    def run(self, system: str, task: str) -> Outcome:
        self.start = time.monotonic()
        self.messages = [{"role": "system", "content": system}, {"role": "user", "content": task}]
        self.transcript.write("prompt", messages=self.messages)
        try:
            while True:
                self.step()
        except Submitted:
            status, message = "submitted", "the model submitted solution.py"
        except LimitExceeded as e:
            status, message = e.args[0], e.args[1]
        except ModelError as e:
            status, message = e.kind if e.kind == "context_length" else "model_error", str(e)
        return Outcome(status, message, self.steps, self.cost, self.usage)

    def step(self) -> None:
        self.check_limits()
        reply = self.model.query(self.messages, TOOLS if self.actions == "tools" else None)
        self.steps += 1
        self.cost += reply.cost_usd
        self.usage += reply.usage
        self.transcript.write("response", step=self.steps, reply=reply.model_dump(), total_cost_usd=self.cost)
        self.messages.append(reply.message())
        try:
            self.act(reply)
            self.format_errors = 0
        except FormatError as e:
            self.format_errors += 1
            self.transcript.write("format_error", message=str(e), count=self.format_errors)
            if self.format_errors >= self.config.max_format_errors:
                raise LimitExceeded("format_error", f"{self.format_errors} replies in a row without a valid action: {e}") from e
            if self.messages[-1]["role"] != "tool":  # tool results already carry the error
                self.messages.append({"role": "user", "content": f"Format error: {e}"})

    def check_limits(self) -> None:
        c = self.config
        if self.steps >= c.step_limit:
            raise LimitExceeded("step_limit", f"step limit reached ({c.step_limit} model calls)")
        if c.cost_limit_usd and self.cost >= c.cost_limit_usd:
            raise LimitExceeded("cost_limit", f"cost limit reached (${self.cost:.4f} of ${c.cost_limit_usd:.2f})")
        if time.monotonic() - self.start >= c.wall_time_s:
            raise LimitExceeded("time_limit", f"wall time limit reached ({c.wall_time_s:.0f} s)")

    def act(self, reply: Reply) -> None:
        if self.actions == "text":
            blocks = BASH_BLOCK.findall(reply.text)
            if len(blocks) != 1:
                raise FormatError(
                    f"found {len(blocks)} fenced bash blocks; reply with exactly one ```bash block "
                    "(its only line `submit` to submit)"
                )
            command = blocks[0].strip()
            tool = "submit" if command == "submit" else "bash"
            self.messages.append({"role": "user", "content": self.run_tool(tool, {"command": command})})
            return
        if not reply.tool_calls:
            raise FormatError("no tool call: call the bash tool to run a command, or submit when done")
        errors = []
        for call in reply.tool_calls:  # every call gets its result, as the APIs require
            try:
                content = self.run_tool(call.name, call.arguments)
            except FormatError as e:
                content = f"Error: {e}"
                errors.append(str(e))
            self.messages.append({"role": "tool", "tool_call_id": call.id, "name": call.name, "content": content})
        if errors:
            raise FormatError("; ".join(errors))

    def run_tool(self, name: str, arguments: dict[str, Any]) -> str:
        if name == "submit":
            self.transcript.write("action", step=self.steps, tool="submit")
            raise Submitted()
        if name != "bash":
            raise FormatError(f"unknown tool {name!r}: the tools are bash and submit")
        command = arguments.get("command")
        if not isinstance(command, str) or not command.strip():
            raise FormatError("the bash tool needs a non-empty string argument 'command'")
        self.transcript.write("action", step=self.steps, tool="bash", command=command)
        left = self.config.wall_time_s - (time.monotonic() - self.start)
        r = self.sandbox.execute(command, timeout=max(1.0, min(self.command_timeout, left)))
        self.transcript.write(
            "observation",
            step=self.steps,
            output=r.output,
            exit_code=r.exit_code,
            timed_out=r.timed_out,
            duration_s=round(r.duration_s, 3),
        )
        if CHECK_COMMAND.search(command) and (result := last_json(r.output)) and "status" in result:
            self.transcript.write("check", source="agent", result=result)
        return observation(r.output, r.exit_code, r.timed_out, self.output_limit)
