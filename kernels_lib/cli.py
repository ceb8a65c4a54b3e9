"""`pkagent bench-lib`: kernels_lib's reference kernels against NCCL and torch symm_mem."""

from __future__ import annotations

import typer


def bench_lib(
    world_size: int = typer.Option(2, "--world-size", "-w", help="Processes, one per GPU."),
    ops: str = typer.Option(
        "", "--ops", help="Comma-separated subset of: all_reduce, all_gather, reduce_scatter, all_to_all, ag_gemm, gemm_rs."
    ),
    out: str = typer.Option("runs/bench-lib", "--out", help="Folder for kernels_lib_bench.json and kernels_lib_bench_table.md."),
    quick: bool = typer.Option(False, "--quick", help="Skip messages over 64 MiB."),
) -> None:
    """Time kernels_lib's reference kernels vs NCCL and torch symm_mem ops (median of CUDA-event
    timings after warm-up, inputs rotated, outputs checked); print and write the table."""
    from configs.errors import PkagentError
    from configs.files import make_dir

    names = check_args(world_size, ops)
    make_dir(out, "--out: cannot write")
    from torch.multiprocessing import ProcessExitedException, ProcessRaisedException

    from kernels_lib.bench import run

    try:
        run(world_size, names, out, quick)
    except (ProcessRaisedException, ProcessExitedException) as e:
        lines = [ln for ln in str(e).strip().splitlines() if ln.strip()]
        raise PkagentError(f"bench-lib: a rank failed: {lines[-1] if lines else e}") from None


def check_args(world_size: int, ops: str) -> list[str] | None:
    """The ops to run (None: all); UsageError for a bad world size or op, or too few GPUs."""
    import torch

    from configs.errors import UsageError
    from kernels_lib.bench import DEFAULT_SIZES

    names = [o.strip() for o in ops.split(",") if o.strip()]
    unknown = [o for o in names if o not in DEFAULT_SIZES]
    if unknown:
        raise UsageError(f"--ops: unknown {', '.join(map(repr, unknown))} (known: {', '.join(DEFAULT_SIZES)})")
    if world_size < 1:
        raise UsageError(f"--world-size {world_size}: expected at least 1")
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if gpus < world_size:
        have = "no CUDA GPU" if gpus == 0 else f"{gpus} CUDA GPU{'s' * (gpus != 1)}"
        raise UsageError(
            f"bench-lib times CUDA kernels on {world_size} GPUs; this machine has {have} (`pkagent doctor` shows what it has)"
        )
    return names or None
