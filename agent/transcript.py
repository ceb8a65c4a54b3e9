"""Transcripts: JSONL, one event a line, each line appended whole as it happens (configs/files.py
LineLog), so a run that dies keeps every line before its death and a full disk ends the run with
"disk full" and a file of whole lines. `pkagent view` renders one with rich (or as an HTML page).

Events: start, prompt, response (the reply with usage and cost), retry, action, observation,
format_error, check (source: agent or trusted), final. Every line carries `event` and `t`
(seconds since the start). Values of API-key variables in the environment are replaced by
[redacted] in every line before it is written.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from configs.errors import InputFileError, input_error
from configs.files import LineLog, write_atomic
from configs.secrets import SECRET_NAME


def secrets(env: dict[str, str] | None = None) -> list[str]:
    env = dict(os.environ) if env is None else env
    return sorted({v for k, v in env.items() if SECRET_NAME.search(k) and len(v) >= 8}, key=len, reverse=True)


def redact(text: str, values: list[str] | None = None) -> str:
    for v in secrets() if values is None else values:
        text = text.replace(v, "[redacted]")
    return text


class Transcript:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._log = LineLog(self.path)
        self._t0 = time.monotonic()
        self._secrets = secrets()

    def write(self, event: str, **data: Any) -> None:
        """Append one event line; OutputError (disk full, ...) if it cannot be written whole."""
        record = {"event": event, "t": round(time.monotonic() - self._t0, 3), **data}
        self._log.append(redact(json.dumps(record, default=str), self._secrets))

    def close(self) -> None:
        self._log.close()

    def __enter__(self) -> Transcript:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass
class Events:
    """A transcript as read: its events with their line numbers, and the lines that were damaged."""

    path: Path
    events: list[dict[str, Any]] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)  # the line number of each event
    damaged: list[str] = field(default_factory=list)  # "line N: what is wrong with it"

    def warn(self, prefix: str = "pkagent: warning") -> None:
        for d in self.damaged:
            print(f"{prefix}: {self.path} {d}; skipped", file=sys.stderr)


def load(path: str | Path) -> Events:
    """Read a transcript, line by line. InputFileError if it cannot be read or holds no event;
    a damaged line (not UTF-8, not JSON, not an event) is skipped and named in `damaged`."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise input_error(e, path) from None
    out = Events(path)
    rows = raw.split(b"\n")
    cut_short = rows[-1] != b""  # no newline at the end: the last line was being written
    for n, row in enumerate(rows, 1):
        if not row.strip():
            continue
        last = n == len(rows) and cut_short
        try:
            event = json.loads(row.decode("utf-8"))
        except UnicodeDecodeError as e:
            out.damaged.append(f"line {n}: not UTF-8 text (byte {e.start})")
            continue
        except json.JSONDecodeError as e:
            why = "cut short (the run died while writing it)" if last else f"not JSON ({e.msg} at column {e.colno})"
            out.damaged.append(f"line {n}: {why}")
            continue
        if not isinstance(event, dict) or not isinstance(event.get("event"), str):
            out.damaged.append(f"line {n}: not a transcript event (no 'event' name)")
            continue
        out.events.append(event)
        out.lines.append(n)
    if not out.events:
        what = "empty" if not raw.strip() else "no readable event in it"
        detail = f" ({out.damaged[0]})" if out.damaged else ""
        raise InputFileError(f"{path}: not a transcript: {what}{detail}")
    return out


def read(path: str | Path) -> list[dict[str, Any]]:
    """The events of a transcript; damaged lines are skipped with a warning on stderr."""
    ev = load(path)
    ev.warn()
    return ev.events


# Rendering ------------------------------------------------------------------------------------


def _check_line(r: dict[str, Any]) -> str:
    text = f"{r.get('status')}: {r.get('trials_passed', 0)}/{r.get('trials', '?')} trials"
    perf = r.get("perf")
    if perf:
        text += (
            f"; {perf['candidate']['median_ms']:.4g} ms vs reference {perf['reference']['median_ms']:.4g} ms"
            f" (speedup {perf['speedup']:.2f}x, {perf['candidate_roofline_fraction']:.0%} of roofline)"
        )
    if r.get("message"):
        text += f"\n{r['message']}"
    return text


def render(events: list[dict[str, Any]], console: Any, full: bool = False, lines: list[int] | None = None) -> None:
    """Print events; one that lacks what its kind needs is named (with its line, if given), not fatal."""
    from rich.errors import MarkupError
    from rich.text import Text

    def clip(text: str, lines: int = 60) -> str:
        parts = text.splitlines()
        if full or len(parts) <= lines:
            return text
        return "\n".join(parts[: lines // 2] + [f"... {len(parts) - lines} lines ..."] + parts[-lines // 2 :])

    for i, e in enumerate(events):
        try:
            _render_one(e, console, clip)
        except (KeyError, TypeError, AttributeError, ValueError, MarkupError) as err:
            where = f"line {lines[i]}: " if lines else ""
            console.print(
                Text(
                    f"{where}damaged {e.get('event')!r} event, not shown ({type(err).__name__}: {err}); "
                    f"its fields: {', '.join(map(str, e))}",
                    style="bold magenta",
                )
            )


def _render_one(e: dict[str, Any], console: Any, clip: Any) -> None:
    from rich.markdown import Markdown
    from rich.markup import escape
    from rich.panel import Panel
    from rich.syntax import Syntax
    from rich.text import Text

    kind, t = e.get("event"), f"{e.get('t', 0):.1f}s"
    if kind == "start":
        info = ", ".join(f"{k}={e[k]}" for k in ("problem", "model", "mode", "device", "world_size") if k in e)
        console.rule(f"[bold]{escape(info)}")
    elif kind == "prompt":
        for m in e.get("messages", []):
            console.print(Panel(Text(clip(m["content"], 40)), title=f"{m['role']} prompt", border_style="dim"))
    elif kind == "response":
        r, step = e["reply"], e.get("step", "?")
        u = r.get("usage", {})
        sub = (
            f"in {u.get('input_tokens', 0)} + cached {u.get('cached_tokens', 0)}, out {u.get('output_tokens', 0)}"
            f" tokens; ${r.get('cost_usd', 0):.4f} (total ${e.get('total_cost_usd', 0):.4f})"
        )
        body = Markdown(r.get("text") or "_(no text)_")
        console.print(Panel(body, title=f"step {step} · model · {t}", subtitle=sub, border_style="cyan"))
    elif kind == "action":
        if e.get("tool") == "submit":
            console.print(Text("submit", style="bold green"))
        else:
            console.print(Panel(Syntax(e.get("command", ""), "bash", word_wrap=True), title="bash", border_style="yellow"))
    elif kind == "observation":
        status = f"exit {e.get('exit_code')}" + (" (timed out)" if e.get("timed_out") else "")
        console.print(
            Panel(
                Text(clip(e.get("output", ""))),
                title=status,
                subtitle=f"{e.get('duration_s', 0):.1f}s",
                border_style="green" if e.get("exit_code") == 0 else "red",
            )
        )
    elif kind == "check":
        r = e.get("result", {})
        style = "bold green" if r.get("status") == "correct" else "bold red"
        console.print(Panel(Text(_check_line(r)), title=f"check ({e.get('source', '?')})", border_style=style))
    elif kind in ("format_error", "retry", "warning"):
        console.print(Text(f"{kind}: {e.get('message', '')}", style="magenta"))
    elif kind == "final":
        style = "bold green" if e.get("correct") else "bold red"
        console.rule(f"[{style}]{escape(str(e.get('status')))}[/]: {escape(str(e.get('message', '')))}")
        console.print(
            Text(
                f"steps {e.get('steps')}, cost ${e.get('cost_usd', 0):.4f}, tokens {e.get('usage')}, "
                f"wall {e.get('wall_s', 0):.1f}s"
            )
        )


def view(path: str | Path, html: str | Path | None = None, full: bool = False) -> None:
    """Print a transcript; with `html`, also write it as a self-contained page there."""
    from rich.console import Console

    ev = load(path)
    render(ev.events, Console(), full=full, lines=ev.lines)
    ev.warn()
    if html is not None:
        from agent.view_html import render_html

        write_atomic(html, render_html(ev.events, _check_line, full=full, lines=ev.lines))
