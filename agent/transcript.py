"""Transcripts: JSONL, one event a line, written and flushed as it happens, so a run that dies
keeps every line before its death. `pkagent view` renders one with rich (or as an HTML page).

Events: start, prompt, response (the reply with usage and cost), retry, action, observation,
format_error, check (source: agent or trusted), final. Every line carries `event` and `t`
(seconds since the start). Values of API-key variables in the environment are replaced by
[redacted] in every line before it is written.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any

_SECRET_NAME = re.compile(r"(API_KEY|_TOKEN|_SECRET)$")


def secrets(env: dict[str, str] | None = None) -> list[str]:
    env = dict(os.environ) if env is None else env
    return sorted({v for k, v in env.items() if _SECRET_NAME.search(k) and len(v) >= 8}, key=len, reverse=True)


def redact(text: str, values: list[str] | None = None) -> str:
    for v in secrets() if values is None else values:
        text = text.replace(v, "[redacted]")
    return text


class Transcript:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(self.path, "a", encoding="utf-8")
        self._t0 = time.monotonic()
        self._secrets = secrets()

    def write(self, event: str, **data: Any) -> None:
        record = {"event": event, "t": round(time.monotonic() - self._t0, 3), **data}
        self._file.write(redact(json.dumps(record, default=str), self._secrets) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> Transcript:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read(path: str | Path) -> list[dict[str, Any]]:
    """The events of a transcript; a last line cut short by a crash is skipped."""
    events = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return events


# Rendering ------------------------------------------------------------------------------------


def _check_line(r: dict[str, Any]) -> str:
    text = f"{r.get('status')}: {r.get('trials_passed', 0)}/{r.get('trials', '?')} trials"
    perf = r.get("perf")
    if perf:
        text += (f"; {perf['candidate']['median_ms']:.4g} ms vs reference {perf['reference']['median_ms']:.4g} ms"
                 f" (speedup {perf['speedup']:.2f}x, {perf['candidate_roofline_fraction']:.0%} of roofline)")
    if r.get("message"):
        text += f"\n{r['message']}"
    return text


def render(events: list[dict[str, Any]], console: Any, full: bool = False) -> None:
    from rich.markdown import Markdown
    from rich.panel import Panel
    from rich.syntax import Syntax
    from rich.text import Text

    def clip(text: str, lines: int = 60) -> str:
        parts = text.splitlines()
        if full or len(parts) <= lines:
            return text
        return "\n".join(parts[: lines // 2] + [f"... {len(parts) - lines} lines ..."] + parts[-lines // 2:])

    for e in events:
        kind, t = e.get("event"), f"{e.get('t', 0):.1f}s"
        if kind == "start":
            info = ", ".join(f"{k}={e[k]}" for k in ("problem", "model", "mode", "device", "world_size") if k in e)
            console.rule(f"[bold]{info}")
        elif kind == "prompt":
            for m in e.get("messages", []):
                console.print(Panel(Text(clip(m["content"], 40)), title=f"{m['role']} prompt", border_style="dim"))
        elif kind == "response":
            r, step = e["reply"], e.get("step", "?")
            u = r.get("usage", {})
            sub = (f"in {u.get('input_tokens', 0)} + cached {u.get('cached_tokens', 0)}, out {u.get('output_tokens', 0)}"
                   f" tokens; ${r.get('cost_usd', 0):.4f} (total ${e.get('total_cost_usd', 0):.4f})")
            body = Markdown(r.get("text") or "_(no text)_")
            console.print(Panel(body, title=f"step {step} · model · {t}", subtitle=sub, border_style="cyan"))
        elif kind == "action":
            if e.get("tool") == "submit":
                console.print(Text("submit", style="bold green"))
            else:
                console.print(Panel(Syntax(e.get("command", ""), "bash", word_wrap=True), title="bash", border_style="yellow"))
        elif kind == "observation":
            status = f"exit {e.get('exit_code')}" + (" (timed out)" if e.get("timed_out") else "")
            console.print(Panel(Text(clip(e.get("output", ""))), title=status, subtitle=f"{e.get('duration_s', 0):.1f}s",
                                border_style="green" if e.get("exit_code") == 0 else "red"))
        elif kind == "check":
            r = e.get("result", {})
            style = "bold green" if r.get("status") == "correct" else "bold red"
            console.print(Panel(Text(_check_line(r)), title=f"check ({e.get('source', '?')})", border_style=style))
        elif kind in ("format_error", "retry", "warning"):
            console.print(Text(f"{kind}: {e.get('message', '')}", style="magenta"))
        elif kind == "final":
            style = "bold green" if e.get("correct") else "bold red"
            console.rule(f"[{style}]{e.get('status')}[/]: {e.get('message', '')}")
            console.print(f"steps {e.get('steps')}, cost ${e.get('cost_usd', 0):.4f}, tokens {e.get('usage')}, "
                          f"wall {e.get('wall_s', 0):.1f}s")


def view(path: str | Path, html: str | Path | None = None, full: bool = False) -> None:
    """Print a transcript; with `html`, also write it as a self-contained page there."""
    from rich.console import Console

    events = read(path)
    console = Console(record=html is not None)
    render(events, console, full=full)
    if html is not None:
        Path(html).write_text(console.export_html(inline_styles=True), encoding="utf-8")
