"""The test suite's own deadlines (tests/deadlines.py): a command is given up only after it has
been quiet, never while it makes progress, however long it runs."""

import subprocess
import sys
import time

import deadlines
import pytest


def test_a_command_that_keeps_printing_outlives_its_quiet_limit():
    t = time.monotonic()
    out = deadlines.run(
        [sys.executable, "-uc", "import time\nfor i in range(6): print(i); time.sleep(0.5)"], quiet_s=1.5, text=True
    )
    assert out.returncode == 0 and out.stdout.split() == [str(i) for i in range(6)]
    assert time.monotonic() - t > 2.5


def test_a_command_that_keeps_writing_files_outlives_its_quiet_limit(tmp_path):
    code = f"import time, pathlib\nfor i in range(6): pathlib.Path(r'{tmp_path}', str(i)).write_text('x'); time.sleep(0.5)"
    out = deadlines.run([sys.executable, "-c", code], quiet_s=1.5, watch=[tmp_path])
    assert out.returncode == 0 and len(list(tmp_path.iterdir())) == 6


def test_a_quiet_command_is_killed_with_its_children_and_its_output_kept():
    t = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired) as e:
        deadlines.run(["bash", "-c", "echo started; sleep 300 & sleep 300"], quiet_s=1, text=True)
    assert e.value.output == "started\n" and time.monotonic() - t < 30


def test_wait_until_gives_up_when_the_process_ends_or_nothing_moves(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    assert deadlines.wait_until(lambda: False, proc=proc, quiet_s=60) is False
    t = time.monotonic()
    assert deadlines.wait_until(lambda: False, watch=[tmp_path], quiet_s=1) is False
    assert time.monotonic() - t < 10
    assert deadlines.wait_until(lambda: True, quiet_s=0) is True


def test_scaled_limits_are_never_shorter(monkeypatch):
    monkeypatch.setenv("PKAGENT_TEST_SLOWDOWN", "3.5")
    assert deadlines.scaled(10) == 35
    monkeypatch.delenv("PKAGENT_TEST_SLOWDOWN")
    assert deadlines.slowdown() >= 1
