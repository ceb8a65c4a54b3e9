"""The local backend: each command is `bash -c` in its own process group on this machine,
optionally inside bubblewrap (`isolation: bwrap`).

Every command runs under a wrapper that sets its limits (`ulimit -d` on each process's data,
`ulimit -f` on file size), carries a per-sandbox tag in its environment, and is killed whole
when it ends or at its deadline: the process group first, then any process that still carries
the tag (one that left the group with setsid). With bwrap, the command also has no network,
sees the system, the interpreter and the repository's packages read-only, and writes only to
the work directory and a private /tmp; GPUs stay usable through the bound /dev/nvidia* nodes.
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

from configs import SandboxConfig
from sandbox import (
    TIMEOUT_EXIT_CODE,
    ExecResult,
    OutputClip,
    SandboxError,
    WorkdirSandbox,
    allowed_env,
    shell_exit_code,
)

REPO = Path(__file__).resolve().parents[1]
TAG = "PKAGENT_SANDBOX_ID"
SYSTEM_DIRS = ("/usr", "/etc", "/opt", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# Limits first (bash counts in KiB), then the command itself as a fresh bash.
WRAPPER = 'ulimit -d {data_kib} -f {file_kib} || exit 125; exec bash -c "$1"'


class LocalSandbox(WorkdirSandbox):
    def __init__(self, config: SandboxConfig, workdir: Path, gpus: list[int] | None = None):
        super().__init__(workdir)
        self.config = config
        self.tag = uuid.uuid4().hex
        home = self.workdir / ".home"
        home.mkdir(exist_ok=True)
        self.env = allowed_env(str(home), gpus)
        self.env["PATH"] = os.pathsep.join(_path_dirs())
        if "LD_LIBRARY_PATH" in os.environ:
            self.env["LD_LIBRARY_PATH"] = os.environ["LD_LIBRARY_PATH"]
        self.env[TAG] = self.tag
        kib = lambda gb: int(gb * 2**20)  # noqa: E731
        self.wrapper = WRAPPER.format(data_kib=kib(config.memory_gb), file_kib=kib(config.max_file_gb))
        self.prefix: list[str] = []
        self.tmp: str | None = None
        if config.isolation == "bwrap":
            self.tmp = tempfile.mkdtemp(prefix="pkagent-tmp-")
            self.prefix = bwrap_argv(self.workdir, self.tmp, shm_bytes=int(config.memory_gb * 2**30 / 2))
            self._probe()

    def _probe(self) -> None:
        """Fail at open, with bwrap's own words, where bubblewrap cannot build the sandbox."""
        if not shutil.which("bwrap"):
            self.close()
            raise SandboxError("isolation bwrap: bubblewrap is not installed (apt-get install bubblewrap)")
        out = subprocess.run([*self.prefix, "true"], capture_output=True, text=True, env=self.env, timeout=60)
        if out.returncode != 0:
            self.close()
            raise SandboxError(f"isolation bwrap: bubblewrap cannot create the sandbox here: {out.stderr.strip()}")

    def execute(self, command: str, timeout: float | None = None) -> ExecResult:
        timeout = self.config.command_timeout_s if timeout is None else timeout
        clip = OutputClip(self.config.output_limit_chars)
        start = time.monotonic()
        proc = subprocess.Popen(
            [*self.prefix, "bash", "-c", self.wrapper, "bash", command],
            cwd=self.workdir,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, which _kill ends whole
        )
        reader = threading.Thread(target=_pump, args=(proc.stdout.fileno(), clip), daemon=True)
        reader.start()
        timed_out = False
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            self._kill(proc.pid)
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

    def _kill(self, pgid: int | None = None) -> None:
        if pgid is not None:
            try:
                os.killpg(pgid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        for _ in range(3):  # a process may fork while we look; look again until none is left
            pids = tagged_processes(self.tag)
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            time.sleep(0.05)

    def close(self) -> None:
        self._kill()
        if self.tmp:
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp = None


def _pump(fd: int, clip: OutputClip) -> None:
    while chunk := os.read(fd, 65536):
        clip.add(chunk)


def tagged_processes(tag: str) -> list[int]:
    """Live processes (not zombies) whose environment carries TAG=tag; Linux /proc only."""
    needle = f"{TAG}={tag}".encode()
    found = []
    for entry in glob.glob("/proc/[0-9]*"):
        try:
            with open(f"{entry}/environ", "rb") as f:
                if needle in f.read().split(b"\0"):
                    found.append(int(entry[6:]))
        except OSError:
            continue
    return [pid for pid in found if pid != os.getpid()]


def _path_dirs() -> list[str]:
    """The running interpreter's bin directory first (so `python` and `pkagent` are this
    project's), then nvcc's directory where the parent's PATH has one, then the system's."""
    dirs = [str(Path(sys.executable).parent)]
    nvcc = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None)
    if nvcc:
        dirs.append(str(Path(nvcc).parent))
    dirs += ["/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"]
    return list(dict.fromkeys(dirs))


def _code_dirs() -> list[str]:
    """What a command needs to read beyond the system: the interpreter, its environment, nvcc's
    tree, and the repository's packages (not the whole repository: other samples' run
    directories and any local secrets stay out)."""
    dirs = {sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix}
    dirs.add(str(Path(sys.executable).resolve().parents[1]))
    nvcc = shutil.which("nvcc")
    if nvcc:
        dirs.add(str(Path(nvcc).resolve().parents[1]))
    dirs.update(str(p.parent) for p in REPO.glob("*/__init__.py"))
    return sorted(d for d in dirs if os.path.isdir(d) and d != "/")


def bwrap_argv(workdir: Path, tmp: str, shm_bytes: int) -> list[str]:
    argv = [shutil.which("bwrap") or "bwrap", "--die-with-parent", "--new-session", "--unshare-all", "--cap-drop", "ALL"]
    for d in SYSTEM_DIRS:
        if os.path.islink(d):
            argv += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            argv += ["--ro-bind", d, d]
    argv += ["--bind", tmp, "/tmp"]  # the private /tmp first: code under /tmp is bound on top of it
    for d in _code_dirs():
        argv += ["--ro-bind", d, d]
    argv += ["--ro-bind", "/sys", "/sys", "--proc", "/proc", "--dev", "/dev"]
    argv += ["--size", str(shm_bytes), "--tmpfs", "/dev/shm"]  # NCCL's shared-memory transport
    for node in sorted(glob.glob("/dev/nvidia*")):
        argv += ["--dev-bind", node, node]
    argv += ["--bind", str(workdir), str(workdir), "--chdir", str(workdir)]
    return argv + ["--remount-ro", "/"]  # bwrap's own root (a tmpfs holding the mount points)
