"""`replay:TRANSCRIPT`: plays back the assistant turns of a recorded transcript, in order, so a
run can be reproduced or shown without an API key. Replayed turns cost nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent.models import Client, ModelError, Reply
from configs import AgentConfig, ConfigError


class ReplayClient(Client):
    provider = "replay"

    def __init__(self, path: str, config: AgentConfig):
        from agent.transcript import read

        self.model, self.config, self.base_url, self.price, self.on_retry = path, config, None, None, None
        if not Path(path).is_file():
            raise ConfigError(f"replay:{path}: transcript not found")
        events = read(path)
        self.turns = [e["reply"] for e in events if e.get("event") == "response"]
        if not self.turns:
            raise ConfigError(f"replay:{path}: no model responses in this transcript")
        start = next((e for e in events if e.get("event") == "start"), {})
        self.actions = start.get("actions")  # the action format the turns were recorded in
        self.recorded = start
        self.position = 0

    def connect(self) -> None:
        pass

    def _request(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> Reply:
        if self.position >= len(self.turns):
            raise ModelError(f"replay:{self.model}: all {len(self.turns)} recorded turns played", "replay")
        reply = Reply.model_validate(self.turns[self.position])
        self.position += 1
        return reply

    def cost(self, usage: Any) -> float:
        return 0.0
