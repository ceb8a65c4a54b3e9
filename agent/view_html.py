"""A transcript as one self-contained HTML page (`pkagent view --html PAGE`).

Laid out for a wide (1280 px) and a narrow (420 px) screen: full width, code and outputs in boxes
that scroll sideways on their own, never the page. Commands and code blocks are highlighted
(Pygments), the model's text is rendered from Markdown, and prompts and outputs longer than
LONG lines fold into a <details> element showing their length (`full`: all of them open); commands
are never folded."""

from __future__ import annotations

import re
from typing import Any

import jinja2
from markdown_it import MarkdownIt
from markupsafe import Markup
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import get_lexer_by_name
from pygments.util import ClassNotFound

LONG = 25  # lines: longer prompts and outputs are folded

CSS = """*{box-sizing:border-box}body{font-family:system-ui,sans-serif;margin:0;padding:1em 2em;color:#222;line-height:1.45}
h1{font-size:1.4em;margin:0 0 0.2em;overflow-wrap:anywhere}.meta{color:#555;font-size:14px;overflow-wrap:anywhere}
.ev{border-left:4px solid #ccc;padding:0.3em 0.9em;margin:0.8em 0;background:#fafafa;min-width:0}
.ev>.head{font-size:13px;color:#555;font-weight:600;overflow-wrap:anywhere}
.model{border-color:#3b82f6;background:#f5f9ff}.action{border-color:#d97706}.ok{border-color:#16a34a}
.bad{border-color:#dc2626}.note{border-color:#a855f7;font-size:14px}.final{border-color:#111;background:#f2f2f2}
pre,.highlight pre{margin:0.3em 0;padding:0.5em 0.7em;background:#fff;border:1px solid #e2e2e2;overflow-x:auto;
font-size:13px;line-height:1.35;max-width:100%}.text{overflow-wrap:anywhere}.text p{margin:0.3em 0}
.text code{background:#eef;padding:0 0.2em}pre.wrap{white-space:pre-wrap;overflow-wrap:anywhere}summary{cursor:pointer;font-size:13px;color:#444}
@media (max-width:600px){body{padding:0.5em 0.6em}pre,.highlight pre{font-size:12px}}
"""

PAGE = jinja2.Environment(autoescape=True).from_string("""<!doctype html>
<html><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>pkagent transcript: {{ title }}</title><style>{{ css }}</style></head><body>
<h1>{{ title }}</h1><div class="meta">{{ meta }}</div>
{% for b in blocks %}<div class="ev {{ b.cls }}"><div class="head">{{ b.head }}</div>
{% if b.fold %}<details{{ " open" if full else "" }}><summary>{{ b.fold }}</summary>{{ b.body }}</details>{% else %}{{ b.body }}{% endif %}
</div>
{% endfor %}</body></html>
""")


def _spans(text: str, language: str) -> str:
    try:
        lexer = get_lexer_by_name(language or "text")
    except ClassNotFound:
        lexer = get_lexer_by_name("text")
    return highlight(text, lexer, HtmlFormatter(nowrap=True))


def _code(text: str, language: str) -> Markup:
    return Markup('<div class="highlight"><pre>{}</pre></div>').format(Markup(_spans(text, language)))


# `cat > solution.py <<'EOF'` ... `EOF`: the file's text is highlighted as the language of its name
HEREDOC = re.compile(r"^(?P<head>[^\n]*<<-?\s*['\"]?(?P<tag>\w+)['\"]?[^\n]*\n)(?P<body>.*?\n)(?P<tail>(?P=tag)\b.*)$", re.S)


def _command(cmd: str) -> Markup:
    m = HEREDOC.match(cmd)
    lang = (
        {".py": "python", ".cu": "cuda", ".cuh": "cuda", ".cpp": "cpp", ".h": "cpp"}.get(
            next(iter(re.findall(r"\S+(\.\w+)\b", m.group("head"))), ""), ""
        )
        if m
        else ""
    )
    if not lang:
        return _code(cmd, "bash")
    spans = _spans(m.group("head"), "bash") + _spans(m.group("body"), lang) + _spans(m.group("tail"), "bash")
    return Markup('<div class="highlight"><pre>{}</pre></div>').format(Markup(spans))


_MD = MarkdownIt("commonmark", {"html": False, "highlight": lambda code, lang, _attrs: str(_code(code, lang))})


def _pre(text: str, wrap: bool = False) -> Markup:
    """Output as printed (scrolls sideways in its box), or with `wrap` a message wrapped to the page."""
    return Markup('<pre class="wrap">{}</pre>' if wrap else "<pre>{}</pre>").format(text)


def _fold(text: str) -> str | None:
    n = text.count("\n") + 1
    return f"{n} lines" if n > LONG else None


def _block(e: dict[str, Any], check_line) -> dict[str, Any] | None:
    kind, t = e.get("event"), f"{float(e.get('t', 0)):.1f} s"
    if kind == "prompt":
        text = "\n\n".join(f"[{m['role']}]\n{m['content']}" for m in e.get("messages", []))
        return dict(cls="note", head=f"prompt · {t}", body=_pre(text), fold=_fold(text) and f"the prompt, {_fold(text)}")
    if kind == "response":
        r = e["reply"]
        u = r.get("usage", {})
        head = (
            f"step {e.get('step', '?')} · model · {t} · in {u.get('input_tokens', 0)} + cached {u.get('cached_tokens', 0)},"
            f" out {u.get('output_tokens', 0)} tokens · ${r.get('cost_usd', 0):.4f} (total ${e.get('total_cost_usd', 0):.4f})"
        )
        body = Markup('<div class="text">{}</div>').format(Markup(_MD.render(r.get("text") or "*(no text)*")))
        return dict(cls="model", head=head, body=body, fold=None)
    if kind == "action":
        if e.get("tool") == "submit":
            return dict(cls="action", head=f"step {e.get('step', '?')} · submit · {t}", body="", fold=None)
        cmd = e.get("command", "")
        return dict(cls="action", head=f"step {e.get('step', '?')} · bash · {t}", body=_command(cmd), fold=None)
    if kind == "observation":
        out = e.get("output", "")
        status = f"exit {e.get('exit_code')}" + (" (timed out)" if e.get("timed_out") else "")
        return dict(
            cls="ok" if e.get("exit_code") == 0 else "bad",
            head=f"output · {status} · {float(e.get('duration_s', 0)):.1f} s",
            body=_pre(out),
            fold=_fold(out) and f"the output, {_fold(out)}",
        )
    if kind == "check":
        r = e.get("result", {})
        return dict(
            cls="ok" if r.get("status") == "correct" else "bad",
            head=f"check ({e.get('source', '?')}) · {t}",
            body=_pre(check_line(r), wrap=True),
            fold=None,
        )
    if kind in ("format_error", "retry", "warning"):
        return dict(cls="note", head=f"{kind} · {t}", body=_pre(e.get("message", ""), wrap=True), fold=None)
    if kind == "final":
        u = e.get("usage") or {}
        text = (
            f"{e.get('status')}: {e.get('message', '')}\nsteps {e.get('steps')}, cost ${e.get('cost_usd', 0):.4f}, tokens "
            f"{u.get('input_tokens', 0)} in + {u.get('cached_tokens', 0)} cached + {u.get('cache_write_tokens', 0)} cache-write, "
            f"{u.get('output_tokens', 0)} out, wall {float(e.get('wall_s', 0)):.1f} s"
        )
        return dict(cls="final", head="correct" if e.get("correct") else "not correct", body=_pre(text, wrap=True), fold=None)
    return None


def render_html(events: list[dict[str, Any]], check_line, full: bool = False, lines: list[int] | None = None) -> str:
    """The page for a transcript's events (read from file lines `lines`); `check_line(result)` is
    the one-line text of a check."""
    start = next((e for e in events if e.get("event") == "start"), {})
    title = " · ".join(str(start[k]) for k in ("problem", "model", "mode") if k in start) or "transcript"
    meta = [f"{k} {start[k]}" for k in ("device", "world_size", "size") if k in start]
    if start.get("device") == "cuda" and start.get("hardware"):  # a CPU run has no GPU hardware profile
        meta.append(f"hardware profile {start['hardware']}")
    if start.get("time"):
        meta.append(f"started {start['time']}")
    blocks = []
    for i, e in enumerate(events):
        try:
            b = _block(e, check_line)
        except (KeyError, TypeError, AttributeError, ValueError) as err:  # named, not fatal, as in the terminal
            where = f"line {lines[i]}: " if lines else ""
            b = dict(
                cls="bad",
                head="damaged event",
                fold=None,
                body=_pre(f"{where}damaged {e.get('event')!r} event, not shown ({type(err).__name__}: {err})", wrap=True),
            )
        if b is not None:
            blocks.append(b)
    return PAGE.render(
        title=title,
        meta=", ".join(meta).replace("world_size", "world size"),
        blocks=blocks,
        full=full,
        css=Markup(CSS + HtmlFormatter(style="default").get_style_defs(".highlight")),
    )
