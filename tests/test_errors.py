"""The one error path: what a user causes ends in one line and exit code 2; a bug in pkagent says
so in one line, with the traceback only on request; several config mistakes are all named."""

import os
import subprocess
import sys

import pytest

import configs
from configs import ConfigError, ExperimentConfig
from configs.errors import InputFileError, OutputError, PkagentError, UsageError, output_error


def run_raising(body: str, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """`pkagent x` where the command x runs `body` (Python statements)."""
    code = (
        "import sys, errno, configs.errors as E\n"
        "from pkagent import cli\n"
        "def x():\n" + "".join(f"    {line}\n" for line in body.splitlines()) + "cli.app.command('x')(x)\n"
        f"sys.exit(cli.run([*{list(args)!r}, 'x']))\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env or {k: v for k, v in os.environ.items() if k != "PKAGENT_DEBUG"},
    )


@pytest.mark.parametrize("exc", ["E.UsageError", "E.ConfigError", "E.InputFileError", "E.OutputError"])
def test_user_errors_are_one_line_exit_2(exc):
    out = run_raising(f"raise {exc}('runs/x: what went wrong')")
    assert out.returncode == 2, out.stderr
    assert out.stderr == "pkagent: runs/x: what went wrong\n"


def test_oserror_with_a_file_names_it():
    out = run_raising("raise OSError(errno.ENOSPC, 'No space left on device', '/mnt/full/result.json')")
    assert out.returncode == 2
    assert out.stderr == "pkagent: /mnt/full/result.json: disk full\n"
    out = run_raising("open('/nonexistent-dir/x', 'w')")
    assert (
        out.returncode == 2
        and out.stderr == "pkagent: /nonexistent-dir/x: No such file or directory\n"
        and len(out.stderr.splitlines()) == 1
    )


def test_bug_is_one_line_then_traceback_on_request():
    out = run_raising("{}['missing']")
    assert out.returncode == 3
    assert out.stderr.splitlines() == [
        "pkagent: internal error, a bug in pkagent: KeyError: 'missing' (--debug or PKAGENT_DEBUG=1 shows the traceback)"
    ]
    for args, env in ((("--debug",), None), ((), dict(os.environ, PKAGENT_DEBUG="1"))):
        out = run_raising("{}['missing']", *args, env=env)
        assert out.returncode == 3 and "Traceback" in out.stderr and "KeyError" in out.stderr
        assert out.stderr.splitlines()[-1].startswith("pkagent: internal error, a bug in pkagent: KeyError")


def test_exit_codes_of_commands_pass_through():
    assert run_raising("import typer\nraise typer.Exit(1)").returncode == 1
    assert run_raising("pass").returncode == 0


def test_hierarchy():
    assert issubclass(ConfigError, UsageError) and issubclass(UsageError, PkagentError)
    assert issubclass(InputFileError, PkagentError) and issubclass(OutputError, PkagentError)
    from sandbox import SandboxError

    assert issubclass(SandboxError, PkagentError)
    assert str(output_error(PermissionError(13, "Permission denied"), "/ro/out")) == "cannot write /ro/out: permission denied"


def test_config_with_several_mistakes_names_them_all(tmp_path):
    p = tmp_path / "exp.yaml"
    p.write_text("name: demo\nmodels: [replay:x]\nsamples: 0\nagent:\n  step_limit: forty\n  colour: red\n")
    with pytest.raises(ConfigError) as err:
        configs.load(ExperimentConfig, p)
    line = str(err.value)
    assert "\n" not in line and line.startswith(f"{p}: 3 problems: ")
    for part in (
        "samples: expected greater than or equal to 1",
        "agent.step_limit: expected a valid integer",
        "agent.colour: unknown key",
    ):
        assert part in line


def test_write_helpers_say_disk_full_and_leave_nothing(tmp_path):
    """/dev/full answers every write with ENOSPC, on any machine; the namespace cases of
    tests/test_faults.py do it on a real full file system."""
    from configs.files import LineLog, make_dir, write_atomic

    log = LineLog("/dev/full")
    with pytest.raises(OutputError, match="^cannot write /dev/full: disk full$"):
        log.append('{"event": "x"}')
    log.close()
    target = tmp_path / "result.json"
    target.write_text("old")
    with pytest.raises(OutputError, match="no/such/result.json"):
        write_atomic(tmp_path / "no" / "such" / "result.json", "new")
    write_atomic(target, "new")
    assert target.read_text() == "new" and sorted(p.name for p in tmp_path.iterdir()) == ["result.json"]
    (tmp_path / "file").write_text("")
    with pytest.raises(OutputError, match="--out: cannot write .*file/sub"):
        make_dir(tmp_path / "file" / "sub", "--out: cannot write")
