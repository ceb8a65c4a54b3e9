"""The local backend: each command is `bash -c` in its own process group on this machine,
optionally inside bubblewrap (`isolation: bwrap`).

Every command runs under the keeper (sandbox/keeper.py), a small subreaper process that ends
the command's whole tree (escaped setsid children included) when the command exits, at its
deadline, and when this process dies by any signal; inside it, a wrapper sets the command's
limits (`ulimit -d` on each process's data, `ulimit -f` on file size). With bwrap, the command
also runs in its own PID namespace (which dies with bwrap), has no network,
sees the system, the interpreter and the repository's packages read-only, and writes only to
the work directory and a private /tmp; GPUs stay usable through the bound /dev/nvidia* nodes.
"""

from __future__ import annotations

import functools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from configs import SandboxConfig
from eval.confine import bwrap_argv, path_dirs
from sandbox import (
    TIMEOUT_EXIT_CODE,
    ExecResult,
    OutputClip,
    SandboxError,
    WorkdirSandbox,
    allowed_env,
    process_alive,
    shell_exit_code,
)

KEEPER = str(Path(__file__).resolve().with_name("keeper.py"))
# Limits first (bash counts in KiB), then the command itself as a fresh bash.
WRAPPER = 'ulimit -d {data_kib} -f {file_kib} || exit 125; exec bash -c "$1"'


class LocalSandbox(WorkdirSandbox):
    def __init__(self, config: SandboxConfig, workdir: Path, gpus: list[int] | None = None):
        super().__init__(workdir)
        self.config = config
        home = self.workdir / ".home"
        home.mkdir(exist_ok=True)
        self.env = allowed_env(str(home), gpus)
        self.env["PATH"] = os.pathsep.join(path_dirs())
        if "LD_LIBRARY_PATH" in os.environ:
            self.env["LD_LIBRARY_PATH"] = os.environ["LD_LIBRARY_PATH"]
        kib = lambda gb: int(gb * 2**20)  # noqa: E731
        self.wrapper = WRAPPER.format(data_kib=kib(config.memory_gb), file_kib=kib(config.max_file_gb))
        self.prefix: list[str] = []
        self.tmp: str | None = None
        self.isolation = resolve_isolation(config.isolation)
        if self.isolation == "bwrap":
            # the command's private /tmp, inside the work directory: nothing is left in the host's /tmp
            # even when this process is killed before close() runs; such a leftover (its owner's pid
            # is in its name) goes at the next open
            for stale in self.workdir.glob(".tmp-*-*"):
                owner = stale.name.split("-")[1]
                if not process_alive(int(owner) if owner.isdigit() else 0):
                    shutil.rmtree(stale, ignore_errors=True)
            self.tmp = tempfile.mkdtemp(prefix=f".tmp-{os.getpid()}-", dir=self.workdir)
            self.prefix = bwrap_argv([self.workdir], self.workdir, Path(self.tmp), shm_bytes=int(config.memory_gb * 2**30 / 2))
            self._probe()

    def _probe(self) -> None:
        """Fail at open, with bwrap's own words, where bubblewrap cannot build the sandbox."""
        problem = bwrap_problem()
        if problem is not None:
            self.close()
            raise SandboxError(f"isolation bwrap: {problem}")
        out = subprocess.run([*self.prefix, "true"], capture_output=True, text=True, env=self.env, timeout=60)
        if out.returncode != 0:
            self.close()
            raise SandboxError(f"isolation bwrap: bubblewrap cannot create the sandbox here: {out.stderr.strip()}")

    def execute(self, command: str, timeout: float | None = None) -> ExecResult:
        timeout = self.config.command_timeout_s if timeout is None else timeout
        clip = OutputClip(self.config.output_limit_chars)
        start = time.monotonic()
        watch_r, watch_w = os.pipe()  # the keeper ends the command's tree when watch_w closes
        try:
            proc = subprocess.Popen(
                [sys.executable, "-I", "-S", KEEPER, str(watch_r), *self.prefix, "bash", "-c", self.wrapper, "bash", command],
                cwd=self.workdir,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                pass_fds=(watch_r,),
                start_new_session=True,  # away from the terminal's Ctrl-C: the keeper ends the tree itself
            )
        except BaseException:
            os.close(watch_w)
            raise
        finally:
            os.close(watch_r)
        reader = threading.Thread(target=_pump, args=(proc.stdout.fileno(), clip), daemon=True)
        reader.start()
        timed_out = False
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            os.close(watch_w)  # at the deadline (or on Ctrl-C here): the keeper ends the tree and exits
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)  # the same, should a copy of watch_w live in a forked process
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:  # a keeper that cannot end its tree: end the keeper
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        reader.join(10)
        if not reader.is_alive():  # else a process that escaped every kill still holds the pipe
            proc.stdout.close()
        duration = time.monotonic() - start
        output = clip.text()
        if timed_out:
            output += f"\n[timed out after {timeout:g} s: the command and all its processes were killed]"
        code = TIMEOUT_EXIT_CODE if timed_out else shell_exit_code(proc.returncode)
        return ExecResult(output=output, exit_code=code, timed_out=timed_out, duration_s=duration)

    def close(self) -> None:
        if self.tmp:
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp = None


@functools.cache
def bwrap_problem() -> str | None:
    """Why bubblewrap cannot isolate a command on this machine; None when it can."""
    if not shutil.which("bwrap"):
        return "bubblewrap is not installed (apt-get install bubblewrap)"
    try:
        out = subprocess.run(
            ["bwrap", "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "true"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"bubblewrap does not run here: {e}"
    if out.returncode != 0:
        return f"bubblewrap cannot create namespaces here: {out.stderr.strip() or f'exit {out.returncode}'}"
    return None


def resolve_isolation(isolation: str) -> str:
    """`auto` -> bwrap where it runs, else none; a warning on stderr (once) whenever it is none."""
    why = "sandbox.isolation is none"
    if isolation == "auto":
        problem = bwrap_problem()
        if problem is None:
            return "bwrap"
        isolation, why = "none", f"sandbox.isolation auto fell back to none: {problem}"
    if isolation == "none":
        _warn_none(why)
    return isolation


@functools.cache
def _warn_none(why: str) -> None:
    user = os.environ.get("USER") or str(os.getuid())
    print(
        f"pkagent: warning: {why}. The agent's commands run as user {user} with this machine's network and every "
        f"file that user may read or write (keys in files, ~/.ssh, other runs); only the environment is filtered. "
        f"Install bubblewrap or use the docker backend.",
        file=sys.stderr,
    )


def _pump(fd: int, clip: OutputClip) -> None:
    while chunk := os.read(fd, 65536):
        clip.add(chunk)
