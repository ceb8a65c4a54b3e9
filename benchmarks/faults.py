"""Counts the fault suite's outcomes and measures the sandbox's process handling; writes docs/faults.md.

1. runs tests/test_faults.py (every fault performed for real) and sorts each case into
   clean / traceback / hang / leftover / lost / unclean by the word its failure starts with;
2. times how long after SIGKILL of `pkagent sandbox run` the command's escaped processes are
   gone (owner killed -> keeper reads end-of-file -> tree ended), per isolation mode;
3. times a command that does nothing (`true`) per isolation mode: the keeper's cost.

    eval "$(bash scripts/container-engine.sh start)"   # optional: the docker case
    python benchmarks/faults.py            # writes docs/faults.md
    python benchmarks/faults.py --out -    # prints it
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

OUTCOMES = ("clean", "traceback", "hang", "leftover", "lost", "unclean")


def run_suite() -> tuple[list[tuple[str, str, str]], float]:
    """(case, outcome, detail) for each case of tests/test_faults.py, and the wall time."""
    with tempfile.TemporaryDirectory() as d:
        xml = Path(d) / "faults.xml"
        t0 = time.monotonic()
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                str(ROOT / "tests" / "test_faults.py"),
                f"--junitxml={xml}",
            ],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
        )
        wall = time.monotonic() - t0
        rows = []
        for case in ET.parse(xml).getroot().iter("testcase"):
            name = case.get("name", "")
            bad = case.find("failure") if case.find("failure") is not None else case.find("error")
            skip = case.find("skipped")
            if skip is not None:
                rows.append((name, "skipped", skip.get("message", "")))
            elif bad is None:
                rows.append((name, "clean", ""))
            else:
                message = bad.get("message", "")
                word = re.search(r"(?:AssertionError|Failed): (\w+)", message)
                outcome = word.group(1) if word and word.group(1) in OUTCOMES else "unclean"
                rows.append((name, outcome, message.splitlines()[0][:160] if message else ""))
        return rows, wall


def kill_latency(isolation: str, repeats: int = 5) -> list[float]:
    """Seconds from SIGKILL of `pkagent sandbox run` until no process of its command is alive."""
    from test_faults import ESCAPES, live

    out = []
    for _ in range(repeats):
        marker = f"700.{uuid.uuid4().int % 10**6}"
        with tempfile.TemporaryDirectory() as w:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "pkagent",
                    "sandbox",
                    "run",
                    "--isolation",
                    isolation,
                    "--workdir",
                    w,
                    "--",
                    ESCAPES.format(m=marker),
                ],
                cwd=ROOT,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            deadline = time.monotonic() + 60
            while len(live(marker, "sleep")) < 4 and time.monotonic() < deadline:
                time.sleep(0.02)
            t0 = time.monotonic()
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            while live(marker) and time.monotonic() - t0 < 30:
                time.sleep(0.005)
            out.append(time.monotonic() - t0)
    return out


def command_cost(isolation: str, n: int = 30) -> tuple[float, float]:
    """Median wall seconds of `true` in the sandbox, and of a plain `bash -c true` (no keeper,
    no sandbox) started from Python, interleaved with it so that both see the same load."""
    from configs import SandboxConfig
    from sandbox import open_sandbox

    boxed, plain = [], []
    with tempfile.TemporaryDirectory() as w, open_sandbox(SandboxConfig(isolation=isolation), Path(w)) as box:
        for _ in range(n):
            boxed.append(box.execute("true").duration_s)
            t0 = time.monotonic()
            subprocess.run(["bash", "-c", "true"])
            plain.append(time.monotonic() - t0)
    return statistics.median(boxed), statistics.median(plain)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "docs" / "faults.md"), help="the page to write, or - to print it")
    a = ap.parse_args()
    from sandbox.local import bwrap_problem

    rows, wall = run_suite()
    counts = Counter(outcome for _, outcome, _ in rows)
    modes = ["none"] + (["bwrap"] if bwrap_problem() is None else [])
    latency = {m: kill_latency(m) for m in modes}
    cost = {m: command_cost(m) for m in modes}
    tried = len(rows) - counts["skipped"]
    lines = [
        "# Faults: what each does to pkagent, performed for real",
        "",
        f"Written by `python benchmarks/faults.py` on {platform.node()} ({platform.system()} {platform.release()}, "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}), {time.strftime('%Y-%m-%d %H:%M %Z')}; "
        f"the suite is `tests/test_faults.py` ({wall:.0f} s).",
        "",
        "Each case performs one fault on the real command line: damaged or missing files, a read-only",
        "and a full file system (tmpfs mounts in a user+mount namespace made by `unshare -Urm`, so the",
        "machine's own disks are untouched), and signals to running commands whose sandboxed command",
        "left processes behind on purpose (`setsid`, a double fork, `nohup`). An outcome is clean when",
        "the command exits with the expected code (2 and one line saying what and where, for what a",
        "user caused), prints no traceback, leaves no process or temporary file, and loses nothing",
        "written before the fault.",
        "",
        "| faults tried | " + " | ".join(OUTCOMES) + " | skipped |",
        "|---" * (len(OUTCOMES) + 2) + "|",
        f"| {tried} | " + " | ".join(str(counts[o]) for o in OUTCOMES) + f" | {counts['skipped']} |",
        "",
        "| case | outcome | detail |",
        "|---|---|---|",
        *[f"| `{name}` | {outcome} | {detail.replace('|', '/')} |" for name, outcome, detail in rows],
        "",
        "## The sandbox's process handling, measured",
        "",
        "Each sandbox command runs under a keeper process (sandbox/keeper.py): a child subreaper that",
        "ends the command's whole tree when the command exits, at its deadline, and when its owner dies",
        "(it watches a pipe only the owner holds, and has SIGTERM as its parent-death signal).",
        "",
        "| isolation | SIGKILL of `pkagent sandbox run` -> every process of its command gone (5 runs, s) "
        "| one `true` command, median of 30 (ms) | a plain `bash -c true`, interleaved (ms) |",
        "|---|---|---|---|",
        *[
            f"| {m} | {', '.join(f'{x:.3f}' for x in latency[m])} | {cost[m][0] * 1e3:.0f} | {cost[m][1] * 1e3:.0f} |"
            for m in modes
        ],
        "",
        "The command was `" + __import__("test_faults").ESCAPES.format(m="MARKER") + "`.",
        "",
        "## Not counted here",
        "",
        "- `pkagent check`'s own rank processes and temporary folder under signals, and its argument",
        "  checks, are the checker's (tests/test_check*.py, docs/checker.md).",
        "- The docker backend needs an engine: its case (a SIGKILLed owner's container, removed at the",
        '  next open) skips without one; `eval "$(bash scripts/container-engine.sh start)"` provides it.',
        "- A full disk under `pkagent run` and `pkagent search`: their files go through the same",
        "  helpers (configs/files.py) as those of `solve` and `report`, which are counted.",
        "",
    ]
    text = "\n".join(lines)
    if a.out == "-":
        print(text)
    else:
        Path(a.out).write_text(text)
        print(f"wrote {a.out}: {tried} faults, " + ", ".join(f"{counts[o]} {o}" for o in OUTCOMES))


if __name__ == "__main__":
    main()
