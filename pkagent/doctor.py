"""`pkagent doctor`: what a user runs first on a new machine.

Every probe is guarded: a machine with no GPU, no nvcc or no Docker engine gets a report that
says so, never a traceback. Probes only read: multicast support is a device attribute query;
no multicast object is ever created.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import sys
from typing import Any

from kernels_lib import multicast
from pkagent import __version__

API_KEYS = (
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "TOGETHER_API_KEY",
    "OPENROUTER_API_KEY",
    "OPENAI_COMPATIBLE_API_KEY",
)


def _run(cmd: list[str], timeout: float = 20) -> str | None:
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout if out.returncode == 0 else None


def _nvlink_matrix(n: int) -> dict[tuple[int, int], str]:
    """Link kind between GPU pairs from `nvidia-smi topo -m` (NV18, PIX, SYS, ...)."""
    text = _run(["nvidia-smi", "topo", "-m"])
    links: dict[tuple[int, int], str] = {}
    if not text:
        return links
    rows = [ln.split() for ln in text.splitlines() if re.match(r"^\s*GPU\d+\s", ln)]
    for row in rows:
        i = int(row[0][3:])
        for j, cell in enumerate(row[1 : n + 1]):
            if i != j and i < n:
                links[(i, j)] = cell
    return links


def _multicast_supported(device: int) -> bool | None:
    """CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED (132) through the driver API; None if unknown."""
    import ctypes

    try:
        cuda = ctypes.CDLL("libcuda.so.1")
        if cuda.cuInit(0) != 0:
            return None
        dev, value = ctypes.c_int(), ctypes.c_int()
        if cuda.cuDeviceGet(ctypes.byref(dev), device) != 0:
            return None
        if cuda.cuDeviceGetAttribute(ctypes.byref(value), 132, dev) != 0:
            return None
        return bool(value.value)
    except OSError:
        return None


def _gpus() -> dict[str, Any]:
    try:
        import torch
    except ImportError as e:
        return {"torch": None, "error": f"torch does not import: {e}"}
    info: dict[str, Any] = {
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "cuda_available": torch.cuda.is_available(),
        "nccl": None,
        "devices": [],
        "peers": [],
    }
    if not info["cuda_available"]:
        info["note"] = "no CUDA device visible: checks run with --device cpu (gloo) only"
        return info
    try:
        info["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
    except Exception:  # noqa: BLE001 - a build without NCCL
        pass
    n = torch.cuda.device_count()
    for i in range(n):
        p = torch.cuda.get_device_properties(i)
        info["devices"].append(
            {
                "index": i,
                "name": p.name,
                "memory_gib": round(p.total_memory / 2**30, 1),
                "capability": f"{p.major}.{p.minor}",
                "sm_count": p.multi_processor_count,
                "multicast_supported": _multicast_supported(i),
            }
        )
    links = _nvlink_matrix(n)
    for i in range(n):
        for j in range(n):
            if i < j:
                link = links.get((i, j), "unknown")
                m = re.fullmatch(r"NV(\d+)", link)
                info["peers"].append(
                    {
                        "pair": [i, j],
                        "peer_access": torch.cuda.can_device_access_peer(i, j),
                        "link": f"NVLink x{m.group(1)}" if m else ("PCIe/" + link if link != "unknown" else "unknown"),
                    }
                )
    return info


def _nvcc() -> dict[str, Any]:
    path = shutil.which("nvcc") or next((p for p in ("/usr/local/cuda/bin/nvcc",) if os.path.exists(p)), None)
    if not path:
        return {"path": None, "version": None, "note": "nvcc not found: CUDA candidates cannot be built here"}
    out = _run([path, "--version"]) or ""
    m = re.search(r"release ([\d.]+)", out)
    return {"path": path, "version": m.group(1) if m else None}


def _docker() -> dict[str, Any]:
    host = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    try:
        import docker

        client = docker.DockerClient(base_url=host, timeout=3)
        client.ping()
        version = client.version().get("Version")
        client.close()
        return {"host": host, "answers": True, "version": version}
    except Exception as e:  # noqa: BLE001 - any failure means "no engine"
        return {"host": host, "answers": False, "error": type(e).__name__}


def collect() -> dict[str, Any]:
    gpus = _gpus()
    devices = gpus.get("devices", [])
    supported = [d["multicast_supported"] for d in devices]
    return {
        "pkagent": __version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "executable": sys.executable,
        **{k: gpus.get(k) for k in ("torch", "torch_cuda", "nccl", "cuda_available")},
        "devices": devices,
        "peers": gpus.get("peers", []),
        "gpu_note": gpus.get("note") or gpus.get("error"),
        "nvcc": _nvcc(),
        "bwrap": shutil.which("bwrap"),
        "bwrap_problem": _bwrap_problem(),
        "multicast": {
            "supported": any(supported) if supported and None not in supported else (None if devices else False),
            "disabled_by_environment": multicast.disabled_by(),
        },
        "docker": _docker(),
        "api_keys_set": [k for k in API_KEYS if os.environ.get(k)],
    }


def render(r: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    con = Console()
    t = Table(title=f"pkagent {r['pkagent']} doctor", show_header=False)
    t.add_row("python", f"{r['python']} ({r['executable']})")
    t.add_row("platform", r["platform"])
    torch_line = r["torch"] or "not installed"
    if r["torch"]:
        torch_line += f", CUDA {r['torch_cuda'] or 'none (CPU build)'}" + (f", NCCL {r['nccl']}" if r["nccl"] else "")
    t.add_row("torch", torch_line)
    t.add_row("GPUs", str(len(r["devices"])) + (f"  ({r['gpu_note']})" if r["gpu_note"] else ""))
    for d in r["devices"]:
        t.add_row(
            f"  cuda:{d['index']}",
            f"{d['name']}, {d['memory_gib']} GiB, sm_{d['capability'].replace('.', '')}, {d['sm_count']} SMs",
        )
    for p in r["peers"]:
        i, j = p["pair"]
        t.add_row(f"  {i} <-> {j}", f"peer access {'yes' if p['peer_access'] else 'NO'}, {p['link']}")
    nv = r["nvcc"]
    t.add_row("nvcc", f"{nv['version']} ({nv['path']})" if nv["path"] else nv["note"])
    t.add_row(
        "bwrap",
        f"{r['bwrap']}: the sandbox isolates commands (isolation auto = bwrap)"
        if not r["bwrap_problem"]
        else f"{r['bwrap_problem']}: isolation auto runs the agent's commands unisolated",
    )
    mc = r["multicast"]
    sup = {True: "supported", False: "not supported", None: "unknown"}[mc["supported"]]
    off = ", ".join(mc["disabled_by_environment"])
    t.add_row("NVLink multicast", f"{sup}; " + (f"disabled by {off}" if off else "NOT disabled by the environment"))
    dk = r["docker"]
    t.add_row("docker engine", f"answers at {dk['host']} (version {dk['version']})" if dk["answers"] else f"none at {dk['host']}")
    t.add_row("API keys set", ", ".join(r["api_keys_set"]) or "none")
    con.print(t)


def _bwrap_problem() -> str | None:
    from sandbox.local import bwrap_problem

    return bwrap_problem()
