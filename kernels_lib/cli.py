"""`pkagent bench-lib`: kernels_lib's reference kernels against NCCL and torch symm_mem."""

from __future__ import annotations

import typer


def bench_lib(
    world_size: int = typer.Option(2, "--world-size", "-w", help="Processes, one per GPU."),
    ops: str = typer.Option("", "--ops", help="Comma-separated subset of: all_reduce, all_gather, reduce_scatter, all_to_all, ag_gemm, gemm_rs."),
    out: str = typer.Option(".", "--out", help="Folder for kernels_lib_bench.json and kernels_lib_bench_table.md."),
    quick: bool = typer.Option(False, "--quick", help="Skip messages over 64 MiB."),
) -> None:
    """Time kernels_lib's reference kernels vs NCCL and torch symm_mem ops (median of CUDA-event
    timings after warm-up, inputs rotated, outputs checked); print and write the table."""
    from kernels_lib.bench import run

    run(world_size, [o for o in ops.split(",") if o] or None, out, quick)
