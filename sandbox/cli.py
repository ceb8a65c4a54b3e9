"""`pkagent sandbox run` and `pkagent sandbox prune`."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Optional

import typer

sandbox = typer.Typer(
    help="Run a command in the sandbox an agent gets; remove leftover sandbox containers.",
    no_args_is_help=True,
)


def _fail(message: str) -> None:
    typer.echo(f"pkagent sandbox: {message}", err=True)
    raise typer.Exit(2)


@sandbox.command()
def run(
    command: list[str] = typer.Argument(..., help="The command, after --. One argument is run as a shell line."),
    backend: str = typer.Option("local", "--backend", help="local or docker."),
    isolation: str = typer.Option("auto", "--isolation", help="auto (bwrap where it runs), none or bwrap (local backend)."),
    image: Optional[str] = typer.Option(None, "--image", help="Image of the docker backend."),
    gpus: int = typer.Option(0, "--gpus", min=0, help="GPUs to take from this machine's pool."),
    timeout: Optional[float] = typer.Option(None, "--timeout", help="Seconds before the command is killed."),
    workdir: Path = typer.Option(Path("."), "--workdir", help="The work directory (created if missing)."),
) -> None:
    """Run COMMAND in exactly the sandbox an agent gets; print its output and exit with its code
    (124 on timeout)."""
    from configs import SandboxConfig, validate
    from sandbox import GpuPool, SandboxError, open_sandbox

    data = {"backend": backend, "isolation": isolation}
    if image:
        data["image"] = image
    if timeout is not None:
        data["command_timeout_s"] = timeout
    config = validate(SandboxConfig, data, "pkagent sandbox run")  # a bad value: one line, exit 2
    line = command[0] if len(command) == 1 else shlex.join(command)
    pool = GpuPool.from_machine() if gpus else GpuPool([])
    try:
        with pool.acquire(gpus) as ids, open_sandbox(config, workdir, ids) as box:
            result = box.execute(line)
    except (SandboxError, ValueError) as e:
        _fail(str(e))
    sys.stdout.write(result.output if result.output.endswith("\n") or not result.output else result.output + "\n")
    raise typer.Exit(result.exit_code)


@sandbox.command()
def prune(
    everything: bool = typer.Option(False, "--all", help="Also remove containers of live runs and of other hosts."),
) -> None:
    """Remove sandbox containers left by runs that crashed (their process is gone)."""
    from sandbox import SandboxError
    from sandbox.docker import prune as prune_containers

    try:
        removed = prune_containers(everything)
    except SandboxError as e:
        _fail(str(e))
    for name in removed:
        typer.echo(f"removed {name}")
    typer.echo(f"{len(removed)} sandbox container{'s' * (len(removed) != 1)} removed")
