"""`replay:TRANSCRIPT`: plays back the assistant turns of a recorded transcript, in order, so a
run can be reproduced or shown without an API key. Replayed turns cost nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from agent.models import Client, ModelError, Reply
from configs import AgentConfig
from configs.errors import InputFileError


class ReplayClient(Client):
    provider = "replay"

    def __init__(self, path: str, config: AgentConfig):
        from agent.transcript import load

        self.model, self.config, self.base_url, self.price, self.on_retry = path, config, None, None, None
        if not Path(path).is_file():
            raise InputFileError(f"replay:{path}: transcript not found")
        try:
            ev = load(path)
        except InputFileError as e:
            raise InputFileError(f"replay:{e}") from None
        if ev.damaged:  # a lost turn would shift every later one: replay a transcript whole or not at all
            raise InputFileError(f"replay:{path}: {'; '.join(ev.damaged)}; a replay needs every turn")
        self.turns = []
        for line, e in zip(ev.lines, ev.events):
            if e["event"] == "response":
                try:
                    self.turns.append(Reply.model_validate(e.get("reply")))
                except ValidationError as err:
                    what = "; ".join(f"{'.'.join(map(str, x['loc'])) or 'reply'}: {x['msg']}" for x in err.errors())
                    raise InputFileError(f"replay:{path}: line {line}: damaged model response ({what})") from None
        if not self.turns:
            raise InputFileError(f"replay:{path}: no model responses in this transcript")
        events = ev.events
        start = next((e for e in events if e.get("event") == "start"), {})
        self.actions = start.get("actions")  # the action format the turns were recorded in
        self.recorded = start
        self.position = 0

    def connect(self) -> None:
        pass

    def _request(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> Reply:
        if self.position >= len(self.turns):
            raise ModelError(f"replay:{self.model}: all {len(self.turns)} recorded turns played", "replay")
        reply = self.turns[self.position].model_copy(deep=True)
        self.position += 1
        return reply

    def cost(self, usage: Any) -> float:
        return 0.0
