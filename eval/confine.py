"""Where a candidate's rank processes run: a scratch directory, an allow-listed environment and,
where bubblewrap works, no network, their own PID and IPC namespaces, and a read-only view of
the system with only the scratch directory and the candidate's build cache writable.

The judges (eval/judge.py) stay outside: they are ours, and their files (the spec with the
check's secret draws) live in a folder the sandbox does not show.
"""

from __future__ import annotations

import functools
import glob
import os
import shutil
import subprocess
import sys
from pathlib import Path

from configs.secrets import SECRET_NAME
from kernels_lib.multicast import MULTICAST_OFF_ENV, disabled_by

ROOT = Path(__file__).resolve().parents[1]
SYSTEM_DIRS = ("/usr", "/etc", "/opt", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
PASSED_PREFIXES = ("CUDA_", "NCCL_", "TORCH_", "NVSHMEM_", "NVIDIA_")
MODES = ("auto", "bwrap", "none")


class ConfineError(Exception):
    """bubblewrap was asked for and cannot run here."""


def candidate_env(home: Path, tmp: Path, extra: tuple[str, ...] = ()) -> dict[str, str]:
    """The environment of a candidate's process: CUDA/NCCL/torch settings (never a name that
    looks like a secret), the names the caller lists in `extra`, and nothing else."""
    env = {k: v for k, v in os.environ.items() if k.startswith(PASSED_PREFIXES) and not SECRET_NAME.search(k)}
    for name in ("LD_LIBRARY_PATH", "CUDA_HOME", "LANG"):
        if name in os.environ:
            env[name] = os.environ[name]
    env.update({k: os.environ[k] for k in extra if k in os.environ})
    env.update(
        PATH=os.pathsep.join(path_dirs()),
        HOME=str(home),
        TMPDIR=str(tmp),
        PYTHONUNBUFFERED="1",
        PYTHONPATH=str(ROOT),
        OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"),
    )
    if disabled_by():
        env.update(MULTICAST_OFF_ENV)
    return env


def path_dirs() -> list[str]:
    """The running interpreter's bin directory first (so `python` and `pkagent` are this
    project's), then nvcc's directory, then the system's."""
    dirs = [str(Path(sys.executable).parent)]
    nvcc = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None)
    if nvcc:
        dirs.append(str(Path(nvcc).parent))
    dirs += ["/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"]
    return list(dict.fromkeys(dirs))


def code_dirs() -> list[str]:
    """What a confined process needs to read beyond the system: the interpreter, its environment,
    nvcc's tree, the project's packages (not the whole repository: run folders and any local
    secrets stay out) and every import directory outside the repository (site-packages a .pth
    file adds, ...)."""
    dirs = {sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix, str(Path(sys.executable).resolve().parents[1])}
    nvcc = shutil.which("nvcc")
    if nvcc:
        dirs.add(str(Path(nvcc).resolve().parents[1]))
    dirs.update(str(p.parent) for p in ROOT.glob("*/__init__.py"))
    dirs.update(p for p in sys.path if p and os.path.isabs(p) and not Path(p).resolve().is_relative_to(ROOT))
    return sorted(d for d in dirs if os.path.isdir(d) and d != "/")


def bwrap_argv(writable: list[Path], cwd: Path, tmp: Path, readable: list[Path] = (), shm_bytes: int = 8 << 30) -> list[str]:
    """bubblewrap's arguments: all namespaces new (no network), the system, the code and
    `readable` read-only, `writable` folders writable, /tmp private, GPUs usable, dies with its parent."""
    argv = [shutil.which("bwrap") or "bwrap", "--die-with-parent", "--new-session", "--unshare-all", "--cap-drop", "ALL"]
    for d in SYSTEM_DIRS:
        if os.path.islink(d):
            argv += ["--symlink", os.readlink(d), d]
        elif os.path.isdir(d):
            argv += ["--ro-bind", d, d]
    argv += ["--bind", str(tmp), "/tmp"]  # first: code under /tmp is bound on top of it
    for d in [*code_dirs(), *map(str, readable)]:
        argv += ["--ro-bind", d, d]
    argv += ["--ro-bind", "/sys", "/sys", "--proc", "/proc", "--dev", "/dev", "--size", str(shm_bytes), "--tmpfs", "/dev/shm"]
    for node in sorted(glob.glob("/dev/nvidia*")):
        argv += ["--dev-bind", node, node]
    for d in writable:
        argv += ["--bind", str(d), str(d)]
    return argv + ["--chdir", str(cwd), "--remount-ro", "/"]


@functools.lru_cache(maxsize=1)
def bwrap_works() -> str:
    """'' where bubblewrap can build the sandbox here, else why not."""
    if not shutil.which("bwrap"):
        return "bubblewrap is not installed (apt-get install bubblewrap)"
    probe = subprocess.run(
        ["bwrap", "--die-with-parent", "--unshare-all", "--ro-bind", "/", "/", "true"], capture_output=True, text=True, timeout=30
    )
    return "" if probe.returncode == 0 else f"bubblewrap cannot create a sandbox here: {probe.stderr.strip()[:300]}"


def resolve(mode: str) -> str:
    """'bwrap' or 'none' for a requested mode (auto: bwrap where it works)."""
    if mode not in MODES:
        raise ConfineError(f"confine {mode!r}: expected one of {', '.join(MODES)}")
    if mode == "none":
        return "none"
    why = bwrap_works()
    if why and mode == "bwrap":
        raise ConfineError(f"confine bwrap: {why}")
    return "none" if why else "bwrap"
