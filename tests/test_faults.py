"""The fault suite: each fault performed for real on the real command line (damaged files, a
read-only and a full file system in a user+mount namespace of this machine, signals to running
processes), asserting the clean outcome: exit code 2 (or the command's own) and one line saying
what and where, nothing left behind (processes, temporary files), nothing already written lost.

A failed assertion starts with the outcome it shows (traceback, hang, leftover, lost, unclean),
which benchmarks/faults.py counts into docs/faults.md.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PY = sys.executable
SOLVE = ("solve", "--problem", "all_reduce", "--device", "cpu", "--world-size", "2")
QUICK = ("size=0.001", "check.trials=1", "check.perf=false")


# --- outcomes ------------------------------------------------------------------------------


def pk(*args: str, env: dict | None = None, timeout: float = 180, prefix: tuple = ()) -> subprocess.CompletedProcess:
    """`pkagent ARGS` (optionally under `prefix`, e.g. a namespace); a run past `timeout` is a hang."""
    cmd = [*prefix, PY, "-m", "pkagent", *args]
    try:
        return subprocess.run(cmd, capture_output=True, text=True, env=_env(env), timeout=timeout, cwd=REPO)
    except subprocess.TimeoutExpired:
        pytest.fail(f"hang: {shlex.join(cmd)} ran past {timeout} s")


def _env(extra: dict | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PKAGENT_DEBUG" and not k.endswith("_API_KEY")}
    return {**env, **(extra or {})}


def clean(out: subprocess.CompletedProcess, code: int, *words: str) -> str:
    """Exit `code` and stderr of one pkagent line (warnings aside) holding `words`; that line."""
    assert "Traceback" not in out.stderr, f"traceback: {out.stderr[-2000:]}"
    assert "a bug in pkagent" not in out.stderr, f"traceback: {out.stderr}"
    lines = [ln for ln in out.stderr.splitlines() if ln.strip() and "warning:" not in ln]
    assert out.returncode == code, f"unclean: exit {out.returncode}, not {code}: {out.stderr[-2000:]}"
    if code == 2:
        assert len(lines) == 1 and lines[0].startswith("pkagent"), f"unclean: not one line: {out.stderr}"
        for w in words:
            assert w.lower() in lines[0].lower(), f"unclean: {w!r} not in {lines[0]!r}"
        return lines[0]
    return "\n".join(lines)


def live(marker: str, program: str = "") -> list[int]:
    """Processes with `marker` in their command line (and running `program`, if given)."""
    pids = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(marker.encode() in a for a in argv) and argv[0].decode(errors="replace").endswith(program):
            pids.append(int(entry.name))
    return pids


def none_left(marker: str, within: float = 5.0) -> None:
    deadline = time.monotonic() + within
    while live(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not live(marker), f"leftover: processes {live(marker)} with {marker} alive {within} s after the fault"


def whole_lines(path: Path) -> list[dict]:
    raw = path.read_bytes() if path.exists() else b""
    assert not raw or raw.endswith(b"\n"), f"lost: {path} ends mid-line"
    try:
        return [json.loads(line) for line in raw.decode().splitlines()]
    except ValueError as e:
        pytest.fail(f"lost: {path} holds a torn line: {e}")


def no_temp_files(folder: Path) -> None:
    left = [p.name for p in folder.rglob("*") if p.name.endswith(".tmp") or p.name.startswith(".pkagent-probe")]
    assert not left, f"leftover: temporary files {left} in {folder}"


# --- a read-only and a full file system, in a user+mount namespace -------------------------------


def _namespace_problem() -> str | None:
    if not shutil.which("unshare"):
        return "unshare (util-linux) is not installed"
    probe = subprocess.run(
        ["unshare", "-Urm", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"], capture_output=True, text=True
    )
    if probe.returncode != 0:
        return f"this machine does not let a user mount a tmpfs in a user+mount namespace: {probe.stderr.strip()}"
    return None


NS_PROBLEM = _namespace_problem()
needs_ns = pytest.mark.skipif(NS_PROBLEM is not None, reason=str(NS_PROBLEM))


@pytest.fixture
def mounts(tmp_path):
    """(prefix, ro, full): a command prefix that runs in a namespace where `ro` is a read-only
    tmpfs and `full` a tmpfs with exactly one page (4 KiB) free, both empty folders outside."""
    ro, full = tmp_path / "ro", tmp_path / "full"
    ro.mkdir()
    full.mkdir()
    script = (
        f"set -e; mount -t tmpfs -o ro,size=1m tmpfs {ro}; mount -t tmpfs -o size=256k tmpfs {full}; "
        f"head -c 4096 /dev/zero > {full}/gap; cat /dev/zero > {full}/fill 2>/dev/null || true; rm {full}/gap; "
        'exec "$@"'
    )
    return ("unshare", "-Urm", "bash", "-c", script, "ns"), ro, full


# --- fixtures: transcripts, run directories ---------------------------------------------------------


def event(kind: str, **data) -> str:
    return json.dumps({"event": kind, "t": 0.0, **data}) + "\n"


def replay_transcript(path: Path, *replies: dict, actions: str = "tools") -> Path:
    path.write_text(
        event("start", problem="all_reduce", model="replayed", mode="agent", actions=actions)
        + "".join(event("response", step=i + 1, reply=r) for i, r in enumerate(replies))
    )
    return path


def bash(command: str) -> dict:
    return {"text": "", "tool_calls": [{"id": uuid.uuid4().hex[:8], "name": "bash", "arguments": {"command": command}}]}


ZERO_SHOT = {
    "text": "```python\nimport torch.distributed as dist\n\ndef solution(x):\n    x = x.clone()\n"
    "    dist.all_reduce(x)\n    return x\n```\n"
}


def run_dir(root: Path) -> Path:
    """A finished two-sample run of `pkagent run`'s layout: sample_0 correct, sample_1 its copy."""
    from agent.solve import SolveResult
    from configs import ExperimentConfig

    config = ExperimentConfig(name="faults", models=["replay:x"], problems=["all_reduce"], device="cpu")
    meta = {
        "name": "faults",
        "config": config.model_dump(mode="json"),
        "problems": {"all_reduce": {"ref": "all_reduce", "category": "collective"}},
        "models": {"replay_x": "replay:x"},
    }
    (root).mkdir(parents=True)
    (root / "experiment.json").write_text(json.dumps(meta))
    for k in (0, 1):
        d = root / "replay_x" / "all_reduce" / "zero-shot" / f"sample_{k}"
        d.mkdir(parents=True)
        r = SolveResult(problem="all_reduce", model="replay:x", mode="zero-shot", status="completed", correct=True)
        (d / "result.json").write_text(r.model_dump_json(indent=2))
    return root


# === damaged and missing inputs ===================================================================


def test_view_empty_transcript(tmp_path):
    (tmp_path / "t.jsonl").write_text("")
    clean(pk("view", str(tmp_path / "t.jsonl")), 2, "t.jsonl", "empty")


def test_view_missing_transcript(tmp_path):
    clean(pk("view", str(tmp_path / "none.jsonl")), 2, "none.jsonl", "not found")


def test_view_undecodable_transcript(tmp_path):
    (tmp_path / "t.jsonl").write_bytes(b"\xff\xfe\x00binary\n")
    clean(pk("view", str(tmp_path / "t.jsonl")), 2, "t.jsonl", "line 1: not UTF-8")


def test_view_names_each_damaged_line_and_shows_the_rest(tmp_path):
    t = tmp_path / "t.jsonl"
    t.write_bytes(
        (event("start", problem="all_reduce") + event("response", step=1) + "not json\n").encode()
        + b"\xff\n[1, 2]\n"
        + event("final", status="[bold", message="done [/]").encode()
        + b'{"event": "fi'
    )
    out = pk("view", str(t))
    clean(out, 0)
    warnings = [ln for ln in out.stderr.splitlines() if "warning" in ln]
    assert [w.split(" line ")[1].split(":")[0] for w in warnings] == ["3", "4", "5", "7"], f"unclean: {out.stderr}"
    assert "cut short" in warnings[-1] and "not UTF-8" in warnings[1]
    assert "problem=all_reduce" in out.stdout and "line 2: damaged 'response' event" in out.stdout
    assert "done [/]" in out.stdout, "lost: a valid event after the damaged ones was not shown"


def test_replay_of_a_damaged_transcript(tmp_path):
    t = replay_transcript(tmp_path / "t.jsonl", ZERO_SHOT)
    t.write_text(t.read_text() + "{torn\n" + event("response", step=2, reply=ZERO_SHOT))
    out = pk(*SOLVE, "--mode", "zero-shot", "--model", f"replay:{t}", "--out", str(tmp_path / "o"), *QUICK)
    clean(out, 2, f"replay:{t}", "line 3: not JSON", "a replay needs every turn")
    assert not (tmp_path / "o").exists(), "leftover: the run directory of a run that never started"


def test_replay_of_a_reply_that_is_not_a_reply(tmp_path):
    t = replay_transcript(tmp_path / "t.jsonl", {"tool_calls": "rm -rf /"})
    out = pk(*SOLVE, "--mode", "zero-shot", "--model", f"replay:{t}", "--out", str(tmp_path / "o"), *QUICK)
    clean(out, 2, "line 2: damaged model response", "tool_calls")


def test_report_counts_a_truncated_result_as_a_harness_error(tmp_path):
    root = run_dir(tmp_path / "run")
    bad = root / "replay_x" / "all_reduce" / "zero-shot" / "sample_1" / "result.json"
    bad.write_text(bad.read_text()[:40])
    out = pk("report", str(root), "--json", "--html")
    clean(out, 0)
    assert f"{bad}: damaged result (Invalid JSON: EOF" in out.stderr and "counted as a harness error" in out.stderr
    assert out.stderr.count("damaged result") == 1, f"unclean: {out.stderr}"
    group = json.loads(out.stdout)["groups"][0]
    assert group["samples"] == 2 and group["pass_at_k"]["1"] == 0.5, f"lost: {group}"
    assert group["failures"] == {"harness error": 1}, group


def test_report_of_a_damaged_experiment_json(tmp_path):
    root = run_dir(tmp_path / "run")
    (root / "experiment.json").write_text('{"name": "faults", "probl')
    clean(pk("report", str(root)), 2, "experiment.json: damaged")


def test_config_with_three_mistakes_names_all(tmp_path):
    cfg = tmp_path / "exp.yaml"
    cfg.write_text("name: x\nmodels: [replay:x]\nsamples: 0\nagent: {step_limit: forty, colour: red}\n")
    clean(pk("run", str(cfg)), 2, "3 problems", "samples", "agent.step_limit", "agent.colour")


def test_problems_of_a_missing_suite():
    clean(pk("problems", "--suite", "pkb:/nonexistent"), 2, "/nonexistent")


@pytest.mark.parametrize(
    "args, words",
    ids=["ops-bogus", "w-0", "no-gpu"],
    argvalues=[
        (("--ops", "bogus"), ("--ops", "bogus")),
        (("-w", "0"), ("--world-size 0",)),
        ((), ("GPU",)),
    ],
)
def test_bench_lib_bad_input_and_no_gpu(args, words):
    import torch

    if not args and torch.cuda.is_available():
        pytest.skip("this machine has CUDA: the no-GPU case cannot happen here")
    clean(pk("bench-lib", *args), 2, *words)


def test_solve_with_unknown_hardware(tmp_path):
    t = replay_transcript(tmp_path / "t.jsonl", ZERO_SHOT)
    out = pk(*SOLVE, "--mode", "zero-shot", "--model", f"replay:{t}", "--out", str(tmp_path / "o"), "hardware=bogus")
    clean(out, 2, "bogus")


# === unwritable outputs (a read-only file system) ===================================================


@needs_ns
def test_solve_out_read_only(tmp_path, mounts):
    prefix, ro, _ = mounts
    t = replay_transcript(tmp_path / "t.jsonl", ZERO_SHOT)
    out = pk(*SOLVE, "--mode", "zero-shot", "--model", f"replay:{t}", "--out", str(ro / "o"), *QUICK, prefix=prefix)
    clean(out, 2, str(ro / "o"), "read-only file system")


@needs_ns
def test_view_html_read_only(tmp_path, mounts):
    prefix, ro, _ = mounts
    t = replay_transcript(tmp_path / "t.jsonl", ZERO_SHOT)
    clean(pk("view", str(t), "--html", str(ro / "p.html"), prefix=prefix), 2, str(ro / "p.html"), "read-only")


@needs_ns
def test_report_out_read_only(tmp_path, mounts):
    prefix, ro, _ = mounts
    root = run_dir(tmp_path / "run")
    clean(pk("report", str(root), "--json", "--out", str(ro / "rep"), prefix=prefix), 2, str(ro / "rep"), "read-only")


@needs_ns
def test_sandbox_workdir_read_only(mounts):
    prefix, ro, _ = mounts
    out = pk("sandbox", "run", "--isolation", "none", "--workdir", str(ro / "w"), "--", "true", prefix=prefix)
    clean(out, 2, str(ro / "w"), "read-only")


@needs_ns
def test_run_dir_read_only(tmp_path, mounts):
    prefix, ro, _ = mounts
    cfg = tmp_path / "exp.yaml"
    t = replay_transcript(tmp_path / "t.jsonl", ZERO_SHOT)
    cfg.write_text(json.dumps({"name": "x", "models": [f"replay:{t}"], "problems": ["all_reduce"], "device": "cpu"}))
    clean(pk("run", str(cfg), f"run_dir={ro}", prefix=prefix), 2, str(ro), "read-only")


# === a full disk ==================================================================================


@needs_ns
def test_solve_on_a_full_disk_stops_with_whole_lines(tmp_path, mounts):
    prefix, _, full = mounts
    t = replay_transcript(tmp_path / "t.jsonl", ZERO_SHOT)
    probe = tmp_path / "probe.py"  # runs in the namespace, after solve: what is on the full disk
    probe.write_text(
        "import json, pathlib, sys\no = pathlib.Path(sys.argv[1])\n"
        "print(json.dumps({p.name: p.read_bytes().decode('latin-1') for p in o.rglob('*') if p.is_file()}))\n"
    )
    cmd = shlex.join(
        [PY, "-m", "pkagent", *SOLVE, "--mode", "zero-shot", "--model", f"replay:{t}", "--out", str(full / "o"), *QUICK]
    )
    out = subprocess.run(
        [*prefix, "bash", "-c", f'{cmd}; echo "rc=$?" >&2; {PY} {probe} {full / "o"}'],
        capture_output=True,
        text=True,
        env=_env(None),
        timeout=180,
        cwd=REPO,
    )
    rc = int(out.stderr.strip().splitlines()[-1].split("=")[1])
    clean(
        subprocess.CompletedProcess(out.args, rc, "", "\n".join(out.stderr.splitlines()[:-1])), 2, "transcript.jsonl", "disk full"
    )
    files = json.loads(out.stdout)
    assert "result.json" not in files, "lost: a result.json written on a full disk"
    text = files.get("transcript.jsonl", "")
    assert not text or text.endswith("\n"), "lost: the transcript ends mid-line"
    assert [json.loads(line)["event"] for line in text.splitlines()][:1] in ([], ["start"])
    assert not [n for n in files if n.endswith(".tmp")], f"leftover: {list(files)}"


@needs_ns
def test_view_html_on_a_full_disk(tmp_path, mounts):
    prefix, _, full = mounts
    t = tmp_path / "t.jsonl"
    t.write_text(event("start", problem="x") + "".join(event("observation", output="x" * 3000) for _ in range(5)))
    out = pk("view", str(t), "--html", str(full / "p.html"), prefix=prefix)
    clean(out, 2, str(full / "p.html"), "disk full")


@needs_ns
def test_report_on_a_full_disk_keeps_the_old_report(tmp_path, mounts):
    prefix, _, full = mounts
    root = run_dir(tmp_path / "run")
    script = (
        f"echo old > {full}/report.json; {shlex.join([PY, '-m', 'pkagent', 'report', str(root), '--json', '--out', str(full)])}"
        f" >/dev/null; echo rc=$? >&2; cat {full}/report.json; ls -a {full}"
    )
    out = subprocess.run([*prefix, "bash", "-c", script], capture_output=True, text=True, env=_env(None), timeout=180, cwd=REPO)
    rc = int(out.stderr.strip().splitlines()[-1].split("=")[1])
    clean(subprocess.CompletedProcess(out.args, rc, "", "\n".join(out.stderr.splitlines()[:-1])), 2, "report.json", "disk full")
    listing = out.stdout.splitlines()
    assert listing[0] == "old", f"lost: the old report.json became {listing[0]!r}"
    assert not [n for n in listing if n.endswith(".tmp")], f"leftover: {listing}"


@needs_ns
def test_transcript_and_atomic_write_at_the_byte_level(tmp_path, mounts):
    """In the namespace: a transcript appended until the disk is full keeps whole lines only; a
    result.json rewritten on the full disk keeps its old content; no temporary file is left."""
    prefix, _, full = mounts
    code = (
        "import json, os, sys\n"
        "from agent.transcript import Transcript\n"
        "from configs.errors import OutputError\n"
        "from configs.files import write_atomic\n"
        f"d = {str(full)!r}\n"
        "os.unlink(d + '/fill')\n"  # room for the old result.json, then full again
        "open(d + '/result.json', 'w').write('{\"old\": true}')\n"
        "open(d + '/fill', 'wb').write(b'')\n"
        "try:\n"
        "    with open(d + '/fill', 'wb') as f:\n"
        "        while True: f.write(b'x' * 4096); f.flush()\n"
        "except OSError: pass\n"
        "os.truncate(d + '/fill', os.path.getsize(d + '/fill') - 4096)\n"  # one page free again
        "tr, n, err = Transcript(d + '/t.jsonl'), 0, None\n"
        "try:\n"
        "    while True: tr.write('observation', output='y' * 1000); n += 1\n"
        "except OutputError as e: err = str(e)\n"
        "try:\n"
        "    write_atomic(d + '/result.json', 'z' * 100000); werr = None\n"
        "except OutputError as e: werr = str(e)\n"
        "print(json.dumps({'n': n, 'err': err, 'werr': werr, 'files': sorted(os.listdir(d)),\n"
        "                  't': open(d + '/t.jsonl').read(), 'result': open(d + '/result.json').read()}))\n"
    )
    out = subprocess.run([*prefix, PY, "-c", code], capture_output=True, text=True, env=_env(None), timeout=120, cwd=REPO)
    assert out.returncode == 0, f"traceback: {out.stderr}"
    r = json.loads(out.stdout)
    assert r["n"] >= 1 and r["err"].endswith("t.jsonl: disk full"), r
    lines = r["t"].splitlines()
    assert r["t"].endswith("\n") and len(lines) == r["n"], f"lost: {len(lines)} lines for {r['n']} writes"
    assert all(json.loads(line)["output"] == "y" * 1000 for line in lines)
    assert r["werr"].endswith("result.json: disk full") and r["result"] == '{"old": true}', f"lost: {r['result'][:50]}"
    assert not [f for f in r["files"] if f.endswith(".tmp")], f"leftover: {r['files']}"


# === signals: nothing outlives its owner ============================================================


def _isolations() -> list:
    from sandbox.local import bwrap_problem

    problem = bwrap_problem()
    return ["none", pytest.param("bwrap", marks=pytest.mark.skipif(problem is not None, reason=str(problem)))]


def start_until(cmd: list[str], marker: str, timeout: float = 120, env: dict | None = None) -> subprocess.Popen:
    """Start `cmd`; return once the four `sleep MARKER` of ESCAPES are alive."""
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(env), cwd=REPO, preexec_fn=_as_in_a_terminal
    )
    deadline = time.monotonic() + timeout
    while len(live(marker, "sleep")) < 4:
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"hang: {marker} never started: {proc.communicate()[1][-2000:]}")
        time.sleep(0.05)
    return proc


def _as_in_a_terminal() -> None:
    """SIGINT as a foreground command has it (a test run in the background inherits it ignored)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def finish(proc: subprocess.Popen, timeout: float = 30) -> str:
    """The stderr of `proc`, which a signal was sent to; still running after `timeout` is a hang."""
    try:
        return proc.communicate(timeout=timeout)[1]
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail(f"hang: {shlex.join(proc.args)} still running {timeout} s after the signal")


ESCAPES = "setsid sleep {m} & (setsid sleep {m} &); nohup sleep {m} >/dev/null 2>&1 & sleep {m}"


@pytest.mark.parametrize("isolation", _isolations())
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
def test_signal_to_sandbox_run_ends_every_process(tmp_path, isolation, sig):
    marker = f"600.{uuid.uuid4().int % 10**6}"
    proc = start_until(
        [
            PY,
            "-m",
            "pkagent",
            "sandbox",
            "run",
            "--isolation",
            isolation,
            "--workdir",
            str(tmp_path / "w"),
            "--",
            ESCAPES.format(m=marker),
        ],
        marker,
    )
    proc.send_signal(sig)
    err = finish(proc)
    none_left(marker)
    if sig != signal.SIGKILL:
        assert proc.returncode == 128 + sig and "Traceback" not in err, f"unclean: exit {proc.returncode}: {err}"
    left = sorted(p.name for p in (tmp_path / "w").iterdir())
    if sig == signal.SIGKILL and isolation == "bwrap":  # no code runs on SIGKILL: the private /tmp goes next time
        assert len(left) == 2 and left[1].startswith(".tmp-"), left
        clean(pk("sandbox", "run", "--isolation", isolation, "--workdir", str(tmp_path / "w"), "--", "true"), 0)
        left = sorted(p.name for p in (tmp_path / "w").iterdir())
    assert left == [".home"], f"leftover: {left}"


@pytest.mark.parametrize("isolation", _isolations())
def test_escaped_children_end_with_their_command(tmp_path, isolation):
    marker = f"601.{uuid.uuid4().int % 10**6}"
    out = pk(
        "sandbox",
        "run",
        "--isolation",
        isolation,
        "--workdir",
        str(tmp_path),
        "--",
        ESCAPES.replace("& sleep {m}", "& echo started").format(m=marker),
    )
    assert clean(out, 0) is not None and out.stdout.strip() == "started"
    none_left(marker, within=0.5)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=lambda s: s.name)
def test_signal_to_solve_mid_command(tmp_path, sig):
    """An agent's command hangs; its `pkagent solve` is killed: no process of the command is left,
    and the transcript keeps whole lines up to the kill."""
    marker = f"602.{uuid.uuid4().int % 10**6}"
    t = replay_transcript(tmp_path / "t.jsonl", bash(ESCAPES.format(m=marker)))
    out = tmp_path / "o"
    proc = start_until(
        [PY, "-m", "pkagent", *SOLVE, "--mode", "agent", "--model", f"replay:{t}", "--out", str(out), *QUICK], marker
    )
    proc.send_signal(sig)
    err = finish(proc)
    none_left(marker)
    events = [e["event"] for e in whole_lines(out / "transcript.jsonl")]
    assert events[0] == "start" and events[-1] == "action", f"lost: {events}"
    if sig != signal.SIGKILL:
        assert proc.returncode == 128 + sig and "Traceback" not in err, f"unclean: exit {proc.returncode}: {err}"
    no_temp_files(out)


@needs_ns
def test_check_with_a_read_only_cache(tmp_path, mounts):
    prefix, ro, _ = mounts
    cand = tmp_path / "solution.py"
    cand.write_text(ZERO_SHOT["text"].split("```python\n")[1].split("```")[0])
    out = pk(
        "check",
        str(cand),
        "--problem",
        "all_reduce",
        "--device",
        "cpu",
        "--size",
        "0.001",
        "--trials",
        "1",
        env={"PKAGENT_CACHE": str(ro / "cache")},
        prefix=prefix,
    )
    clean(out, 2, str(ro / "cache"), "read-only")


def test_run_with_unknown_hardware(tmp_path):
    t = replay_transcript(tmp_path / "t.jsonl", ZERO_SHOT)
    cfg = tmp_path / "exp.yaml"
    cfg.write_text(
        json.dumps(
            {
                "name": "x",
                "models": [f"replay:{t}"],
                "problems": ["all_reduce"],
                "device": "cpu",
                "hardware": "bogus",
                "run_dir": str(tmp_path / "runs"),
            }
        )
    )
    clean(pk("run", str(cfg)), 2, "bogus.yaml: file not found")
    assert not (tmp_path / "runs").exists(), "leftover: a run directory for a run that never started"


def _engine_problem() -> str | None:
    if not (os.environ.get("DOCKER_HOST") and os.environ.get("SANDBOX_TEST_IMAGE")):
        return 'no container engine: eval "$(bash scripts/container-engine.sh start)" starts one'
    return None


@pytest.mark.skipif(_engine_problem() is not None, reason=str(_engine_problem()))
def test_docker_sandbox_of_a_killed_owner_goes_at_the_next_open(tmp_path):
    """SIGKILL of `pkagent sandbox run --backend docker` leaves its container (no code runs); the
    next docker sandbox opened on this host removes it."""
    from sandbox.docker import LABEL, OWNER, client

    marker = f"603.{uuid.uuid4().int % 10**6}"
    image = os.environ["SANDBOX_TEST_IMAGE"]
    run = ("sandbox", "run", "--backend", "docker", "--image", image, "--workdir", str(tmp_path))
    proc = subprocess.Popen(
        [PY, "-m", "pkagent", *run, "--", f"sleep {marker}"],
        cwd=REPO,
        env=_env(None),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )

    def mine() -> list:
        return [
            c
            for c in client().containers.list(all=True, filters={"label": LABEL})
            if c.labels.get(OWNER, "").endswith(f":{proc.pid}")
        ]

    deadline = time.monotonic() + 120
    while not (mine() and live(marker, "sleep")) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
    assert mine(), f"hang: no container came up: {proc.poll()}"
    proc.kill()
    proc.wait()
    clean(pk(*run, "--", "true"), 0)
    assert not mine(), "leftover: the killed owner's container is still there after the next open"
    none_left(marker)


def test_nan_and_inf_settings_are_refused(tmp_path):
    t = replay_transcript(tmp_path / "t.jsonl", ZERO_SHOT)
    out = pk(
        *SOLVE, "--mode", "zero-shot", "--model", f"replay:{t}", "--out", str(tmp_path / "o"), "size=inf", "check.timeout_s=nan"
    )
    clean(out, 2, "2 problems", "size: expected a finite number", "check.timeout_s: expected a finite number")
