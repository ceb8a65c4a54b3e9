"""The docker sandbox backend against a real engine (DOCKER_HOST) and the image named by
SANDBOX_TEST_IMAGE (any image with bash and python3). Skips, saying why, where either is missing;
`eval "$(bash scripts/container-engine.sh start)"` provides both."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import deadlines
import pytest
from fakes.network import PROBE, host_addresses

from configs import SandboxConfig
from kernels_lib.multicast import MULTICAST_OFF_ENV
from sandbox import SandboxError, open_sandbox

pytestmark = pytest.mark.docker
IMAGE = os.environ.get("SANDBOX_TEST_IMAGE", "")


def _engine_problem() -> str | None:
    if not os.environ.get("DOCKER_HOST"):
        return 'DOCKER_HOST is not set: eval "$(bash scripts/container-engine.sh start)" starts an engine and sets it'
    if not IMAGE:
        return 'SANDBOX_TEST_IMAGE is not set: eval "$(bash scripts/container-engine.sh start)" builds one and sets it'
    try:
        from sandbox.docker import client

        client().images.get(IMAGE)
    except SandboxError as e:
        return str(e)
    except Exception as e:  # noqa: BLE001 - the image is missing or the engine misbehaves
        return f"image {IMAGE} unusable: {e}"
    return None


PROBLEM = _engine_problem()
if PROBLEM:
    pytest.skip(PROBLEM, allow_module_level=True)

from sandbox.docker import LABEL, client  # noqa: E402


def config(**kw) -> SandboxConfig:
    base = dict(
        backend="docker", image=IMAGE, command_timeout_s=60, output_limit_chars=2000, memory_gb=0.5, cpus=1, max_file_gb=0.01
    )
    return SandboxConfig(**{**base, **kw})


@pytest.fixture
def box(tmp_path):
    with open_sandbox(config(), tmp_path / "work") as sb:
        yield sb


def container_commands(sb) -> list[str]:
    """Command lines of every process in the container, read by a fresh exec."""
    out = sb.container.exec_run(["bash", "-c", "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done"])
    return [line for line in out.output.decode().splitlines() if line.strip()]


def test_commands_run_in_the_bind_mounted_work_dir(box):
    box.put("in.txt", "from the host\n")
    r = box.execute("cat in.txt; echo made > out.txt; cd /; export X=1; exit 5")
    assert r.exit_code == 5 and not r.timed_out and r.output == "from the host\n"
    assert box.get("out.txt") == b"made\n"
    r = box.execute('pwd; echo "X=${X:-unset}"')
    assert r.output.split() == ["/work", "X=unset"]


def test_environment_is_an_allow_list(tmp_path, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-parent-secret")
    monkeypatch.setenv("NCCL_DEBUG", "WARN")
    with open_sandbox(config(), tmp_path / "w", gpus=[5]) as sb:
        r = sb.execute("env")
    assert "sk-ant-parent-secret" not in r.output
    env = dict(line.split("=", 1) for line in r.output.splitlines() if "=" in line)
    for name, value in MULTICAST_OFF_ENV.items():
        assert env[name] == value
    # The container sees only its own GPUs, numbered from 0.
    assert env["CUDA_VISIBLE_DEVICES"] == "0" and env["NCCL_DEBUG"] == "WARN" and env["HOME"] == "/work/.home"


def test_no_network(box):
    """A server on every address of this machine that the container must not reach, and the
    container's own list of interfaces, which holds only its loopback."""
    server = socket.create_server(("0.0.0.0", 0))
    server.settimeout(0.1)
    targets = [f"{a}:{server.getsockname()[1]}" for a in host_addresses()]
    try:
        outside = deadlines.run([sys.executable, "-c", PROBE, targets[0]], text=True)
        assert "CONNECTED" in outside.stdout, outside.stdout + outside.stderr  # the probe can tell
        server.accept()[0].close()
        box.put("probe.py", PROBE)
        r = box.execute(f"python3 probe.py {' '.join(targets)}")
        with pytest.raises(TimeoutError):
            server.accept()  # nothing from the container arrived
    finally:
        server.close()
    assert "CONNECTED" not in r.output and r.output.count("failed") == len(targets), r.output
    assert "interfaces ['lo'] ['lo']" in r.output, r.output
    assert box.container.attrs["HostConfig"]["NetworkMode"] == "none"


def test_writes_only_in_work_dir_and_tmp(box):
    r = box.execute(
        "for d in / /etc /usr /usr/lib/python3 /root; do touch $d/x 2>/dev/null && echo WROTE $d; done;"
        " echo t > /tmp/t && cat /tmp/t"
    )
    assert "WROTE" not in r.output and r.output.strip() == "t"
    r = box.execute(f"ls {box.workdir.parent}")  # the host's side of the work directory is not there
    assert r.exit_code != 0 and "No such file or directory" in r.output


def test_installed_files_cannot_be_modified(box):
    r = box.execute(
        "f=$(python3 -c 'import json; print(json.__file__)'); cp $f /work/before;"
        " echo 'x' >> $f && echo MODIFIED; rm -f $f && echo REMOVED; cmp $f /work/before && echo SAME"
    )
    assert "MODIFIED" not in r.output and "REMOVED" not in r.output and "SAME" in r.output


def test_forked_tree_is_killed_whole_at_deadline(box):
    marker = f"300.{uuid.uuid4().int % 10**6}"
    r = box.execute(f"sleep {marker} & (sleep {marker} &); setsid sleep {marker} & bash -c 'sleep {marker}'", timeout=1)
    assert r.timed_out and r.exit_code == 124 and 1 <= r.duration_s < 15
    assert not [c for c in container_commands(box) if marker in c]
    assert box.execute("echo alive").output.strip() == "alive"  # the container survives the kill


def test_background_process_does_not_outlive_its_command(box):
    marker = f"301.{uuid.uuid4().int % 10**6}"
    r = box.execute(f"nohup sleep {marker} >/dev/null 2>&1 & setsid sleep {marker} & echo started")
    assert r.exit_code == 0 and not r.timed_out and r.duration_s < 10 and "started" in r.output
    assert not [c for c in container_commands(box) if marker in c]


def test_output_flood_is_cut(box):
    r = box.execute("echo FIRST; head -c 100000000 /dev/zero | tr '\\0' x; echo; echo LAST")
    assert r.exit_code == 0 and r.output.startswith("FIRST\n") and r.output.rstrip().endswith("LAST")
    assert "bytes of output dropped here" in r.output and len(r.output) < 2200


def test_memory_exhaustion_fails_cleanly(box):
    r = box.execute("python3 -c 'x = bytearray(2 * 2**30)'")  # the limit is 0.5 GB
    assert r.exit_code != 0 and not r.timed_out
    assert box.execute("echo still usable").output.strip() == "still usable"


def test_disk_exhaustion_fails_cleanly(box):
    r = box.execute("head -c 50000000 /dev/zero > big.bin")  # max_file_gb is 0.01
    assert r.exit_code != 0 and (box.workdir / "big.bin").stat().st_size <= 0.01 * 2**30 + 4096
    r = box.execute(
        "for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30; do"
        " head -c 10000000 /dev/zero > /tmp/f$i || exit 1; done"
    )
    assert r.exit_code != 0  # /tmp is capped at half the memory limit
    assert box.execute("rm -f /tmp/f*; echo ok").output.strip() == "ok"


def test_limits_and_labels_are_set(box):
    box.container.reload()
    host = box.container.attrs["HostConfig"]
    assert host["Memory"] == int(0.5 * 2**30) and host["NanoCpus"] == 10**9
    assert host["ReadonlyRootfs"] is True and host["ShmSize"] >= 2**28
    assert box.container.labels[LABEL] == "1"


def test_container_is_removed_on_close(tmp_path):
    sb = open_sandbox(config(), tmp_path / "w")
    name = sb.container.name
    sb.close()
    assert name not in [c.name for c in client().containers.list(all=True)]


def _open_in_child(tmp_path: Path, then: str) -> tuple[subprocess.Popen, str]:
    code = textwrap.dedent(
        f"""
        import sys, time
        from pathlib import Path
        from configs import SandboxConfig
        from sandbox import open_sandbox
        sb = open_sandbox(SandboxConfig(backend="docker", image={IMAGE!r}, memory_gb=0.5), Path({str(tmp_path)!r}))
        print(sb.container.name, flush=True)
        {then}
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    return proc, proc.stdout.readline().strip()


def test_container_is_removed_at_interpreter_exit(tmp_path):
    proc, name = _open_in_child(tmp_path, "sys.exit(0)  # without close()")
    assert name and proc.wait(60) == 0
    assert name not in [c.name for c in client().containers.list(all=True)]


def test_prune_removes_leftovers_of_a_crashed_run_only(tmp_path):
    with open_sandbox(config(), tmp_path / "b") as live:  # opened first: an open prunes too
        proc, crashed = _open_in_child(tmp_path / "a", "time.sleep(600)")
        proc.send_signal(signal.SIGKILL)  # no atexit, no close: the container is left behind
        proc.wait(10)
        assert crashed in [c.name for c in client().containers.list(all=True)]
        out = deadlines.run([sys.executable, "-m", "pkagent", "sandbox", "prune"], text=True)
        assert out.returncode == 0, out.stderr
        assert f"removed {crashed}" in out.stdout and live.container.name not in out.stdout
        names = [c.name for c in client().containers.list(all=True)]
        assert crashed not in names and live.container.name in names


def test_missing_image_and_missing_engine_are_clear_errors(tmp_path, monkeypatch):
    with pytest.raises(SandboxError, match="sandbox/Dockerfile"):
        open_sandbox(config(image="pkagent-no-such-image:0"), tmp_path / "w")
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    with pytest.raises(SandboxError, match="no Docker engine answers"):
        open_sandbox(config(), tmp_path / "w")


def test_cli_run_uses_the_docker_backend(tmp_path):
    out = deadlines.run(
        [
            sys.executable,
            "-m",
            "pkagent",
            "sandbox",
            "run",
            "--backend",
            "docker",
            "--image",
            IMAGE,
            "--workdir",
            str(tmp_path),
            "--timeout",
            "30",
            "--",
            "cat /proc/1/cmdline | tr '\\0' ' '; pwd; exit 4",
        ],
        text=True,
    )
    assert out.returncode == 4, out.stderr
    assert "while :; do sleep" in out.stdout and out.stdout.strip().endswith("/work")
