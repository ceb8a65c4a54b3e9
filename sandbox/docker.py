"""The docker backend: one long-lived container per sample, one exec per command.

The container has no network, a read-only root filesystem, the work directory bind-mounted at
/work (the only place that persists), a size-limited /tmp and /dev/shm, CPU, memory and process
limits, no capabilities, and only the sample's GPUs (device requests). Its PID 1 is a bash loop
that only reaps orphans. Each command is `bash -c` under a wrapper that sets the file-size limit
and, when the command returns, kills every other process of the container (`kill -9 -1` spares
PID 1 and the caller), so nothing started by one command outlives it. At the deadline the same
kill comes from a second exec, from outside the command. Containers carry labels; they are
removed on close, at interpreter exit, and, after a crash or SIGKILL, by the next sandbox opened
on this host or `pkagent sandbox prune`.
"""

from __future__ import annotations

import atexit
import os
import socket
import threading
import time
from pathlib import Path

from configs import SandboxConfig
from sandbox import TIMEOUT_EXIT_CODE, ExecResult, OutputClip, SandboxError, WorkdirSandbox, allowed_env, process_alive

LABEL = "pkagent.sandbox"
OWNER = "pkagent.owner"  # "hostname:pid" of the process that opened it
WORKDIR = "/work"
PID1 = "trap 'exit 0' TERM; while :; do sleep 86400 & wait; done"
WRAPPER = 'ulimit -f {file_kib} || exit 125; bash -c "$1"; rc=$?; kill -9 -1 2>/dev/null; exit $rc'

_open: dict[str, object] = {}  # container id -> container, for removal at interpreter exit


def client():
    """A docker SDK client for DOCKER_HOST (or the default socket) that answers, or SandboxError."""
    import docker

    try:
        c = docker.from_env(timeout=120)
        c.ping()
        return c
    except docker.errors.DockerException as e:
        where = os.environ.get("DOCKER_HOST") or "the default socket"
        raise SandboxError(f"no Docker engine answers at {where} ({e}); start one, or use the local backend") from None


class DockerSandbox(WorkdirSandbox):
    def __init__(self, config: SandboxConfig, workdir: Path, gpus: list[int] | None = None):
        import docker
        from docker.types import DeviceRequest

        super().__init__(workdir)
        self.config = config
        self.client = client()
        prune()  # containers of this host whose pkagent was killed (SIGKILL: no code ran to remove them)
        try:
            self.client.images.get(config.image)
        except docker.errors.ImageNotFound:
            raise SandboxError(
                f"image {config.image!r} is not on the engine; build it on a machine with registry access: "
                f"docker build -f sandbox/Dockerfile -t {config.image} .  (see sandbox/README.md)"
            ) from None
        (self.workdir / ".home").mkdir(exist_ok=True)
        gpus = gpus or []
        env = allowed_env(f"{WORKDIR}/.home", list(range(len(gpus))))  # the container numbers its GPUs from 0
        for host_path in ("CUDA_HOME", "CUDA_PATH"):
            env.pop(host_path, None)
        mem = int(config.memory_gb * 2**30)
        self.file_kib = int(config.max_file_gb * 2**20)
        self.container = self.client.containers.create(
            config.image,
            ["bash", "-c", PID1],
            user=f"{os.getuid()}:{os.getgid()}",  # files in the work directory stay the user's
            environment=env,
            working_dir=WORKDIR,
            volumes={str(self.workdir): {"bind": WORKDIR, "mode": "rw"}},
            read_only=True,
            tmpfs={"/tmp": f"size={mem // 2},exec"},
            shm_size=mem // 2,
            network_mode="none",
            mem_limit=mem,
            memswap_limit=mem,
            nano_cpus=int(config.cpus * 1e9),
            pids_limit=8192,
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            device_requests=[DeviceRequest(device_ids=[str(g) for g in gpus], capabilities=[["gpu"]])] if gpus else [],
            labels={LABEL: "1", OWNER: f"{socket.gethostname()}:{os.getpid()}"},
        )
        _open[self.container.id] = self.container
        try:
            self.container.start()
        except docker.errors.APIError as e:
            self.close()
            raise SandboxError(f"the sandbox container did not start: {e.explanation or e}") from None

    def execute(self, command: str, timeout: float | None = None) -> ExecResult:
        timeout = self.config.command_timeout_s if timeout is None else timeout
        api = self.client.api
        clip = OutputClip(self.config.output_limit_chars)
        start = time.monotonic()
        wrapper = WRAPPER.format(file_kib=self.file_kib)
        exec_id = api.exec_create(self.container.id, ["bash", "-c", wrapper, "bash", command], workdir=WORKDIR)["Id"]
        stream = api.exec_start(exec_id, stream=True)
        reader = threading.Thread(target=_pump, args=(stream, clip), daemon=True)
        reader.start()
        try:
            reader.join(timeout)
        finally:  # the deadline, or an exception here (Ctrl-C): kill from outside the command
            timed_out = reader.is_alive()
            if timed_out:
                self.container.exec_run(["bash", "-c", "kill -9 -1"])  # every process but PID 1
                reader.join(10)
        duration = time.monotonic() - start
        output = clip.text()
        if timed_out:
            output += f"\n[timed out after {timeout:g} s: the command and all its processes were killed]"
            code = TIMEOUT_EXIT_CODE
        else:
            code = api.exec_inspect(exec_id)["ExitCode"]
        return ExecResult(output=output, exit_code=code, timed_out=timed_out, duration_s=duration)

    def close(self) -> None:
        container = _open.pop(self.container.id, None)
        if container is not None:
            _remove(container)


def _pump(stream, clip: OutputClip) -> None:
    try:
        for chunk in stream:
            clip.add(chunk)
    except Exception as e:  # noqa: BLE001 - the engine went away; say so in the output
        clip.add(f"\n[output stream broke: {type(e).__name__}: {e}]\n".encode())


def _remove(container) -> None:
    try:
        container.remove(force=True)
    except Exception:  # noqa: BLE001 - already gone, or the engine is; prune catches the rest
        pass


@atexit.register
def _remove_open() -> None:
    for container in list(_open.values()):
        _remove(container)
    _open.clear()


def prune(everything: bool = False) -> list[str]:
    """Remove sandbox containers whose owner process is gone (all of them with everything=True);
    return their names. Containers opened on another host are kept unless everything=True."""
    removed = []
    for container in client().containers.list(all=True, filters={"label": LABEL}):
        host, _, pid = container.labels.get(OWNER, "").rpartition(":")
        if everything or (host == socket.gethostname() and not process_alive(int(pid) if pid.isdigit() else 0)):
            _remove(container)
            removed.append(container.name)
    return removed
