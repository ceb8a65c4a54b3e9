"""Session-wide test settings: the per-test hang limit (pytest-timeout, `timeout` in
pyproject.toml) scales with how slow the machine is right now (tests/deadlines.py), and the run
ends with one line per reason a test was skipped."""

from __future__ import annotations

from collections import Counter

import pytest
from deadlines import slowdown


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    try:
        ini = config.getini("timeout")  # registered by pytest-timeout
    except ValueError:
        return
    if ini and getattr(config.option, "timeout", None) is None:
        config.option.timeout = float(ini) * slowdown()


def pytest_report_header(config):
    return f"machine slowdown {slowdown()}x (deadlines handed to the code under test scale with it)"


def pytest_terminal_summary(terminalreporter):
    skipped = terminalreporter.stats.get("skipped", [])
    if not skipped:
        return
    reasons: Counter = Counter()
    for rep in skipped:
        path = rep.location[0] if rep.location else rep.nodeid.split("::")[0]
        reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
        reasons[(path, reason.removeprefix("Skipped: "))] += 1
    terminalreporter.section(f"{len(skipped)} skipped, and why")
    for (path, reason), n in sorted(reasons.items()):
        terminalreporter.write_line(f"{n:3d}  {path}: {reason}")
