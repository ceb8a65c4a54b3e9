"""The local sandbox backend, without and with bubblewrap, and `pkagent sandbox run`.

The bwrap cases skip, saying why, where bubblewrap is missing or cannot create namespaces.
"""

from __future__ import annotations

import hashlib
import resource
import shutil
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import deadlines
import pytest
from fakes.network import PROBE, host_addresses

from configs import SandboxConfig
from kernels_lib.multicast import MULTICAST_OFF_ENV
from sandbox import ExecResult, SandboxError, open_sandbox
from sandbox.local import LocalSandbox

REPO = Path(__file__).resolve().parents[1]


def _bwrap_problem() -> str | None:
    if not shutil.which("bwrap"):
        return "bubblewrap is not installed (apt-get install bubblewrap)"
    out = subprocess.run(["bwrap", "--unshare-all", "--ro-bind", "/", "/", "true"], capture_output=True, text=True)
    if out.returncode != 0:
        return f"bubblewrap cannot create namespaces here: {out.stderr.strip()}"
    return None


BWRAP_PROBLEM = _bwrap_problem()
needs_bwrap = pytest.mark.skipif(BWRAP_PROBLEM is not None, reason=str(BWRAP_PROBLEM))


def config(**kw) -> SandboxConfig:
    base = dict(command_timeout_s=60, output_limit_chars=2000, memory_gb=2, max_file_gb=0.01)
    return SandboxConfig(**{**base, **kw})


@pytest.fixture(params=["none", pytest.param("bwrap", marks=needs_bwrap)])
def box(request, tmp_path):
    with open_sandbox(config(isolation=request.param), tmp_path / "work", gpus=[2, 3]) as sb:
        yield sb


@pytest.fixture
def jail(tmp_path):
    if BWRAP_PROBLEM:
        pytest.skip(BWRAP_PROBLEM)
    with open_sandbox(config(isolation="bwrap"), tmp_path / "work") as sb:
        yield sb


def live_with(marker: str) -> list[int]:
    """Processes of this machine whose command line contains marker."""
    pids = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            if marker.encode() in (entry / "cmdline").read_bytes():
                pids.append(int(entry.name))
        except OSError:
            continue
    return pids


# --- the interface ---------------------------------------------------------------------------


def test_each_command_is_a_fresh_shell_in_the_work_dir(box):
    r = box.execute("echo kept > f.txt; cd /; export X=1; echo out; echo err >&2; exit 3")
    assert isinstance(r, ExecResult) and r.exit_code == 3 and not r.timed_out and r.duration_s > 0
    assert "out" in r.output and "err" in r.output
    r = box.execute('pwd; echo "X=${X:-unset}"; cat f.txt')
    assert r.output.split() == [str(box.workdir), "X=unset", "kept"]


def test_put_and_get_stay_inside_the_work_dir(box):
    box.put("sub/a.py", "print('hi')\n")
    assert box.execute("python sub/a.py").output.strip() == "hi"
    box.execute("printf 'b\\0' > b.bin")
    assert box.get("b.bin") == b"b\0"
    for bad in ("../escape.txt", "/etc/passwd", ".", "sub/../../x"):
        with pytest.raises(SandboxError, match="inside the work directory"):
            box.put(bad, "x")
    box.execute("ln -s /etc/hostname leak")  # a link the command plants must not lead get outside
    with pytest.raises(SandboxError):
        box.get("leak")
    assert not (box.workdir.parent / "escape.txt").exists()


def test_killed_by_signal_reports_shell_exit_code(box):
    assert box.execute("kill -TERM $$").exit_code == 128 + 15


# --- environment -----------------------------------------------------------------------------


def test_environment_is_an_allow_list(monkeypatch, tmp_path):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-parent-secret-1234")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-parent-secret")
    monkeypatch.setenv("NCCL_DEBUG", "INFO")
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "1")  # the parent's own value must not reach the sandbox
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3,4,5,6,7")
    isolations = ["none"] + ([] if BWRAP_PROBLEM else ["bwrap"])
    for isolation in isolations:
        with open_sandbox(config(isolation=isolation), tmp_path / isolation, gpus=[2, 3]) as sb:
            r = sb.execute("env; cat /proc/$$/environ | tr '\\0' '\\n'")
            assert r.exit_code == 0
            assert "sk-parent-secret" not in r.output and "aws-parent-secret" not in r.output
            env = dict(line.split("=", 1) for line in r.output.splitlines() if "=" in line)
            for name, value in MULTICAST_OFF_ENV.items():
                assert env[name] == value
            assert env["CUDA_VISIBLE_DEVICES"] == "2,3" and env["NCCL_DEBUG"] == "INFO"
            assert Path(env["HOME"]).is_relative_to(sb.workdir)


def test_no_gpus_given_means_no_gpu_visible(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    with open_sandbox(config(), tmp_path / "w") as sb:
        assert sb.execute('echo "[$CUDA_VISIBLE_DEVICES]"').output.strip() == "[]"


def test_project_interpreter_and_command_resolve(box):
    r = box.execute("pkagent --version && python -c 'import sys, torch, eval; print(sys.prefix)'")
    assert r.exit_code == 0, r.output
    assert r.output.split()[-1] == sys.prefix


# --- deadlines and leftovers -----------------------------------------------------------------


def test_forked_tree_is_killed_whole_at_deadline(box):
    marker = f"300.{uuid.uuid4().int % 10**6}"
    cmd = f"sleep {marker} & (sleep {marker} &); setsid sleep {marker} & bash -c 'sleep {marker}'"
    r = box.execute(cmd, timeout=1)
    assert r.timed_out and r.exit_code == 124 and 1 <= r.duration_s < 10
    assert "timed out after 1 s" in r.output
    assert live_with(marker) == []


def test_background_process_does_not_outlive_its_command(box):
    marker = f"301.{uuid.uuid4().int % 10**6}"
    r = box.execute(f"nohup sleep {marker} >/dev/null 2>&1 & setsid sleep {marker} & echo started")
    assert r.exit_code == 0 and not r.timed_out and r.duration_s < 10 and "started" in r.output
    assert live_with(marker) == []


# --- output, memory, disk --------------------------------------------------------------------


def test_output_flood_is_cut_to_head_and_tail_and_memory_stays_bounded(box):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB
    r = box.execute("echo FIRST; head -c 300000000 /dev/zero | tr '\\0' x; echo; echo LAST")
    grew_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert r.exit_code == 0
    assert r.output.startswith("FIRST\n") and r.output.rstrip().endswith("LAST")
    assert "bytes of output dropped here" in r.output and len(r.output) < 2000 + 200
    dropped = int(r.output.split("[... ")[1].split()[0])
    assert dropped == len("FIRST\n") + 300_000_001 + len("LAST\n") - 2000
    assert grew_mib < 100, f"the host process grew by {grew_mib:.0f} MiB reading 300 MB of output"


def test_endless_output_is_cut_at_deadline(box):
    r = box.execute("yes flood", timeout=1)
    assert r.timed_out and r.exit_code == 124 and len(r.output) < 2200


def test_memory_exhaustion_fails_cleanly(tmp_path):
    with open_sandbox(config(memory_gb=0.5), tmp_path / "w") as sb:
        r = sb.execute("python -c 'x = bytearray(2 * 2**30)'")
        assert r.exit_code != 0 and "MemoryError" in r.output
        assert sb.execute("echo still usable").output.strip() == "still usable"


def test_disk_exhaustion_fails_cleanly(box):
    r = box.execute("head -c 50000000 /dev/zero > big.bin")  # the limit is 0.01 GB
    assert r.exit_code != 0 and "File size limit exceeded" in r.output
    assert (box.workdir / "big.bin").stat().st_size <= 0.01 * 2**30 + 4096
    assert box.execute("echo ok").output.strip() == "ok"


# --- bubblewrap: network, filesystem ---------------------------------------------------------


def test_bwrap_has_no_network(jail):
    """A server of this machine, on every address of this machine, that the sandbox must not reach;
    and the sandbox's own list of interfaces, which holds only its loopback."""
    server = socket.create_server(("0.0.0.0", 0))
    server.settimeout(0.1)
    port = server.getsockname()[1]
    targets = [f"{a}:{port}" for a in host_addresses()]
    probe = PROBE
    try:
        # the same probe outside the sandbox reaches the server: the probe can tell
        outside = deadlines.run([sys.executable, "-c", probe, targets[0]], text=True)
        assert "CONNECTED" in outside.stdout, outside.stdout + outside.stderr
        server.accept()[0].close()
        jail.put("probe.py", probe)
        r = jail.execute(f"python probe.py {' '.join(targets)}")
        with pytest.raises(TimeoutError):
            server.accept()  # nothing from the sandbox arrived
    finally:
        server.close()
    assert "CONNECTED" not in r.output and r.output.count("failed") == len(targets), r.output
    assert "interfaces ['lo'] ['lo']" in r.output, r.output


def test_bwrap_writes_only_in_work_dir_and_private_tmp(jail, tmp_path):
    marker = f"escape-{uuid.uuid4().hex}"
    read_only = ["/", "/etc", "/usr", str(Path.home()), str(REPO), str(REPO / "eval"), sys.prefix]
    if REPO.is_relative_to("/tmp"):
        # A checkout under /tmp: inside the sandbox its root is a folder of the private /tmp (its
        # packages are bound read-only on top), so a write there is private; the host check below
        # still proves nothing reached the real checkout.
        read_only.remove(str(REPO))
    r = jail.execute(
        f"for d in {' '.join(read_only)}; do touch $d/{marker} 2>/dev/null && echo WROTE $d; done;"
        f" touch {tmp_path}/{marker}; echo private > /tmp/{marker} && cat /tmp/{marker}; touch ok"
    )
    assert "WROTE" not in r.output and "private" in r.output
    for d in [*read_only, tmp_path, "/tmp"]:
        assert not (Path(d) / marker).exists(), f"the command wrote {d}/{marker} on the host"
    assert (jail.workdir / "ok").exists()


def test_bwrap_checker_files_cannot_be_modified(jail):
    files = [REPO / "eval" / "check.py", REPO / "sandbox" / "local.py", Path(sys.executable).resolve()]
    digest = {f: hashlib.sha256(f.read_bytes()).hexdigest() for f in files}
    r = jail.execute(
        " ; ".join(f"echo 'x' >> {f} && echo MODIFIED {f}" for f in files)
        + f" ; rm -f {REPO}/eval/check.py && echo REMOVED ; mount -o remount,rw {REPO}/eval && echo REMOUNTED"
    )
    assert "MODIFIED" not in r.output and "REMOVED" not in r.output and "REMOUNTED" not in r.output
    assert all(hashlib.sha256(f.read_bytes()).hexdigest() == digest[f] for f in files)


def test_bwrap_hides_everything_but_the_work_dir(jail, tmp_path):
    (tmp_path / "other_sample.txt").write_text("another sample's candidate")
    r = jail.execute(f"cat {REPO}/pyproject.toml {tmp_path}/other_sample.txt")
    assert r.exit_code != 0 and r.output.count("No such file or directory") == 2, r.output


def test_bwrap_runs_the_checker_on_cpu(jail):
    jail.put("solution.py", (REPO / "tests" / "candidates" / "honest.py").read_text())
    r = jail.execute(
        "pkagent check solution.py --problem all_reduce --device cpu --trials 1 --size 0.01 --json", timeout=deadlines.scaled(240)
    )
    assert r.exit_code == 0, r.output
    assert '"status":"correct"' in r.output.replace(" ", "")


# --- errors ----------------------------------------------------------------------------------


def test_unknown_backend_is_a_clear_error(tmp_path):
    with pytest.raises(SandboxError, match="unknown sandbox backend 'podman'"):
        open_sandbox(SandboxConfig.model_construct(backend="podman", isolation="none"), tmp_path)


@pytest.fixture
def no_bwrap(tmp_path, monkeypatch):
    from sandbox import local

    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap there
    local.bwrap_problem.cache_clear()
    local._warn_none.cache_clear()
    yield
    local.bwrap_problem.cache_clear()
    local._warn_none.cache_clear()


def test_missing_bwrap_is_a_clear_error(tmp_path, no_bwrap):
    with pytest.raises(SandboxError, match="bubblewrap is not installed"):
        LocalSandbox(config(isolation="bwrap"), tmp_path / "w")


def test_auto_without_bwrap_runs_unisolated_and_says_what_the_agent_can_reach(tmp_path, no_bwrap, capsys):
    with LocalSandbox(config(), tmp_path / "w") as sb:
        assert sb.isolation == "none"
    err = capsys.readouterr().err
    assert "sandbox.isolation auto fell back to none: bubblewrap is not installed" in err
    assert "network and every file that user may read or write" in err


@needs_bwrap
def test_isolation_defaults_to_bwrap_where_it_runs(tmp_path, capsys):
    assert SandboxConfig().isolation == "auto"
    with open_sandbox(SandboxConfig(), tmp_path / "w") as sb:
        assert sb.isolation == "bwrap"
        assert "lo" in sb.execute("cat /proc/net/dev").output and "eth" not in sb.execute("cat /proc/net/dev").output
    assert "warning" not in capsys.readouterr().err


# --- pkagent sandbox run ---------------------------------------------------------------------


def pk(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return deadlines.run([sys.executable, "-m", "pkagent", *args], text=True, cwd=cwd)


def test_cli_run_prints_output_and_exits_with_its_code(tmp_path):
    out = pk("sandbox", "run", "--workdir", str(tmp_path), "--", "echo hello > f; cat f; exit 7")
    assert out.returncode == 7 and out.stdout == "hello\n"
    out = pk("sandbox", "run", "--workdir", str(tmp_path), "--", "python", "-c", "print('a b')")
    assert out.returncode == 0 and out.stdout == "a b\n"


def test_cli_run_timeout_exits_124(tmp_path):
    isolation = "none" if BWRAP_PROBLEM else "bwrap"
    out = pk("sandbox", "run", "--isolation", isolation, "--timeout", "1", "--workdir", str(tmp_path), "--", "sleep 30")
    assert out.returncode == 124 and "timed out after 1 s" in out.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (["--backend", "podman"], "backend: expected 'local' or 'docker' (got 'podman')"),
        (["--isolation", "chroot"], "isolation: expected 'auto', 'none' or 'bwrap' (got 'chroot')"),
        (["--timeout", "-1"], "command_timeout_s"),
        (["--backend", "docker", "--isolation", "bwrap"], "isolation applies to the local backend only"),
    ],
)
def test_cli_run_bad_options_give_one_line_and_exit_2(tmp_path, args, message):
    out = pk("sandbox", "run", *args, "--workdir", str(tmp_path), "--", "true")
    assert out.returncode == 2 and message in out.stderr
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="this machine has nvidia-smi")
def test_cli_run_asking_for_gpus_without_any_says_why(tmp_path):
    out = pk("sandbox", "run", "--gpus", "2", "--workdir", str(tmp_path), "--", "true")
    assert out.returncode == 2 and "asked for 2 GPUs; this pool has 0 (nvidia-smi not found" in out.stderr
