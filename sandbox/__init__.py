"""Where the agent's commands run: a work directory, a shell, its own GPUs, and nothing else.

`open_sandbox(config, workdir, gpus)` returns a Sandbox of the configured backend:
  local  (sandbox/local.py)   a process group per command, optionally inside bubblewrap;
  docker (sandbox/docker.py)  a long-lived container per sample, one exec per command.
Each `execute` is a fresh `bash -c` in the work directory: only files persist between commands.
GpuPool (sandbox/gpus.py) hands each sample a disjoint set of GPUs. See sandbox/README.md.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from configs import SandboxConfig
from configs.errors import PkagentError
from configs.files import make_dir
from configs.secrets import SECRET_NAME
from kernels_lib.multicast import MULTICAST_OFF_ENV
from sandbox.gpus import GpuPool

__all__ = ["ExecResult", "Sandbox", "SandboxError", "GpuPool", "open_sandbox"]

TIMEOUT_EXIT_CODE = 124


class SandboxError(PkagentError):
    """A sandbox that cannot be opened or used; str(err) says what to do about it."""


@dataclass
class ExecResult:
    output: str  # stdout and stderr interleaved, cut to head and tail with a note if over the limit
    exit_code: int  # 124 on timeout, 128+N when killed by signal N
    timed_out: bool
    duration_s: float


class Sandbox(Protocol):
    workdir: Path  # host path of the sample's work directory

    def execute(self, command: str, timeout: float | None = None) -> ExecResult: ...
    def put(self, path: str, data: bytes | str) -> None: ...
    def get(self, path: str) -> bytes: ...
    def close(self) -> None: ...
    def __enter__(self) -> Sandbox: ...
    def __exit__(self, *exc: object) -> None: ...


def open_sandbox(config: SandboxConfig, workdir: Path, gpus: list[int] | None = None) -> Sandbox:
    """A sandbox over `workdir` (created if missing) that sees only `gpus` (None: no GPU)."""
    if config.backend == "local":
        from sandbox.local import LocalSandbox

        return LocalSandbox(config, workdir, gpus)
    if config.backend == "docker":
        if config.isolation == "bwrap":
            raise SandboxError("isolation applies to the local backend only; the docker backend is its own isolation")
        from sandbox.docker import DockerSandbox

        return DockerSandbox(config, workdir, gpus)
    raise SandboxError(f"unknown sandbox backend {config.backend!r}: expected 'local' or 'docker'")


# --- shared by the backends ---------------------------------------------------------------

PASSED_PREFIXES = ("CUDA_", "NCCL_", "TORCH_")


def allowed_env(home: str, visible_gpus: list[int] | None) -> dict[str, str]:
    """The environment every sandboxed command gets: an allow-list, never the parent's secrets."""
    env = {k: v for k, v in os.environ.items() if k.startswith(PASSED_PREFIXES) and not SECRET_NAME.search(k)}
    env.update(
        HOME=home,
        USER="sandbox",
        LOGNAME="sandbox",
        LANG=os.environ.get("LANG", "C.UTF-8"),
        CUDA_DEVICE_ORDER="PCI_BUS_ID",  # the order of nvidia-smi, whose indices the GPU pool uses
        CUDA_VISIBLE_DEVICES=",".join(map(str, visible_gpus or [])),
    )
    env.update(MULTICAST_OFF_ENV)
    return env


class OutputClip:
    """Keeps the first and the last `limit // 2` bytes of a stream; counts the bytes between."""

    def __init__(self, limit: int):
        self.half = max(limit // 2, 1)
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0

    def add(self, chunk: bytes) -> None:
        room = self.half - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        self.tail += chunk
        if len(self.tail) > self.half:
            cut = len(self.tail) - self.half
            self.dropped += cut
            del self.tail[:cut]

    def text(self) -> str:
        head, tail = self.head.decode(errors="replace"), self.tail.decode(errors="replace")
        if not self.dropped:
            return head + tail
        return f"{head}\n[... {self.dropped} bytes of output dropped here ...]\n{tail}"


def process_alive(pid: int) -> bool:
    """Whether process `pid` exists on this machine (pid <= 0: no)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def shell_exit_code(returncode: int) -> int:
    """subprocess's -N for 'killed by signal N' as a shell reports it: 128+N."""
    return 128 - returncode if returncode < 0 else returncode


class WorkdirSandbox:
    """What every backend shares: the work directory on the host, put/get, the context manager."""

    def __init__(self, workdir: Path):
        self.workdir = make_dir(Path(workdir).resolve(), "cannot use as the sandbox's work directory:")

    def _host_path(self, path: str) -> Path:
        # resolve() follows symlinks, so a link the command planted cannot lead put/get outside.
        target = (self.workdir / path).resolve()
        if not target.is_relative_to(self.workdir) or target == self.workdir:
            raise SandboxError(f"{path!r} is not a file path inside the work directory {self.workdir}")
        return target

    def put(self, path: str, data: bytes | str) -> None:
        target = self._host_path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data.encode() if isinstance(data, str) else data)

    def get(self, path: str) -> bytes:
        return self._host_path(path).read_bytes()

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
