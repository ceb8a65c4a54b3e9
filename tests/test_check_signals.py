"""`pkagent check` ended by a signal in the middle of a hung candidate: nothing it started may
live on (judges, runners, the candidate's own children), and SIGTERM and Ctrl-C leave no
temporary folder. On GPUs the same is shown by scripts/gpu_check_sweep.sh (stage `signals`)."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import deadlines
import pytest

CANDIDATES = Path(__file__).parent / "candidates"


def started_by(marker: str) -> list[int]:
    """Live processes whose command line mentions `marker` (the check's private TMPDIR)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmd = (entry / "cmdline").read_bytes()
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if marker.encode() in cmd and stat.rsplit(")", 1)[1].split()[0] != "Z":
                pids.append(int(entry.name))
    return pids


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL, signal.SIGINT])
@pytest.mark.parametrize("confine", ["none", "auto"])
def test_no_process_outlives_a_killed_check(tmp_path, sig, confine):
    env = dict(os.environ, TMPDIR=str(tmp_path))
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pkagent",
            "check",
            str(CANDIDATES / "escapes_and_hangs.py"),
            "--problem",
            "all_reduce",
            "--device",
            "cpu",
            "--size",
            "0.001",
            "--timeout",
            "600",
            "--confine",
            confine,
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + deadlines.scaled(240)
    # wait until the candidate's escaped child is up on both ranks (it writes a file each)
    while len(list(tmp_path.glob("pkagent-check-*/run/tmp/escaped-*"))) + len(list(tmp_path.glob("escaped-*"))) < 2:
        assert proc.poll() is None and time.monotonic() < deadline, "the check never reached the hang"
        time.sleep(0.5)
    assert started_by(str(tmp_path))
    proc.send_signal(sig)
    proc.wait(timeout=deadlines.scaled(30))
    end = time.monotonic() + deadlines.scaled(5)
    while started_by(str(tmp_path)) and time.monotonic() < end:
        time.sleep(0.2)
    assert started_by(str(tmp_path)) == [], "processes outlived the check"
    if sig != signal.SIGKILL:
        assert list(tmp_path.glob("pkagent-check-*")) == [], "the check's folder was left behind"
