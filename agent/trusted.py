"""What the harness does for a sample outside its sandbox: lease it GPUs, and score its final
kernel with the trusted checker (eval.check.check). solve(), the runner's existing generations
and the search's screens and re-checks all score through `check_kernel`, so a kernel is judged
the same way wherever it comes from."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from agent.solve import SolveConfig
    from eval.result import CheckResult
    from sandbox import GpuPool


class Gpus(Protocol):
    """Where a sample's GPUs come from: sandbox.GpuPool, or the runner's pool seen from a sample's process."""

    def acquire(self, n: int) -> AbstractContextManager[list[int]]: ...


@contextmanager
def lease(gpus: Gpus | None, n: int, visible: bool = False) -> Iterator[list[int] | None]:
    """n GPUs from `gpus` for one phase of a sample, given back when the phase ends; None (and
    nothing leased) when there is no source (CPU, or a process that uses its own GPUs).
    visible: also make them this process's CUDA_VISIBLE_DEVICES (in PCI bus order) for the phase,
    for the checker's rank processes, which inherit the environment and use devices 0..n-1."""
    if gpus is None:
        yield None
        return
    with gpus.acquire(n) as ids:
        if not visible:
            yield ids
            return
        old = {k: os.environ.get(k) for k in ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")}
        os.environ.update(CUDA_VISIBLE_DEVICES=",".join(map(str, ids)), CUDA_DEVICE_ORDER="PCI_BUS_ID")
        try:
            yield ids
        finally:
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


def machine_pool(
    world_size: int, gpus: list[int] | None = None, where: str = "--device cuda", on_cpu: str = "--device cpu"
) -> GpuPool:
    """This machine's GPU pool (only `gpus` of it, when given), which must hold world_size GPUs;
    else a ConfigError naming the option (`where`) and how to run without GPUs (`on_cpu`)."""
    from configs import ConfigError
    from sandbox import GpuPool

    pool = GpuPool.from_machine()
    why = f" ({pool.note})" if pool.note else ""
    if gpus is not None:
        if not set(gpus) <= set(pool.gpus):
            raise ConfigError(f"gpus: {gpus}: this machine has GPUs {pool.gpus or 'none'}{why}")
        pool = GpuPool(pool.links, gpus)
    if len(pool.gpus) < world_size:
        raise ConfigError(
            f"{where}: this machine has {len(pool.gpus)} GPUs{why} and the run needs {world_size}; without GPUs use {on_cpu}"
        )
    return pool


def check_kernel(cfg: SolveConfig, candidate: str | Path, gpus: Gpus | None = None, **args: Any) -> CheckResult:
    """The trusted check of `candidate` with the sample's settings (timed when cfg.check.perf, on
    CUDA); `args` override eval.check.check's arguments (trials, perf, size, seed, batches).
    On CUDA it runs on world_size GPUs leased from `gpus`, or on this process's GPUs without one."""
    from eval.check import check

    cuda = cfg.device == "cuda"
    c = cfg.check
    args = (
        dict(
            world_size=cfg.world_size,
            device=cfg.device,
            trials=c.trials,
            perf=c.perf and cuda,
            size=cfg.size,
            timeout=c.timeout_s,
            hardware=cfg.hardware,
            repeats=c.repeats,
            time_budget_s=c.time_budget_s,
            ci_width=c.ci_width,
            confine=c.confine,
            pass_env=tuple(c.pass_env),
            graphs=c.graphs,
        )
        | args
    )
    with lease(gpus if cuda else None, cfg.world_size, visible=True):
        return check(str(candidate), cfg.problem, **args)
