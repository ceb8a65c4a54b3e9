"""Where problems come from: our suite (`all_reduce`) or a ParallelKernelBench checkout
(`pkb:PATH::ID`), so that its problems and its candidates run through the same checker.

A ParallelKernelBench problem is `reference/{id}_{name}.py` exposing `solution(*args)`, with
inputs from `utils/input_output_tensors.py: create_input_tensor(rank, world_size, problem_id,
base_shape, dtype, trial, device)`. It has no roofline, and its outputs are compared as float
with atol = rtol = 1e-2, as that benchmark does.
"""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import torch

from eval.problem import Meta, Problem, ProblemError, load_problem

PKB_PREFIX = "pkb:"


def qualify(problem: str, suite: str | None) -> str:
    """The problem reference the checker passes around: `ID` or `pkb:PATH::ID`."""
    if not suite or suite == "pkagent":
        return problem
    if not suite.startswith(PKB_PREFIX):
        raise ProblemError(f"unknown suite {suite!r} (expected pkagent or pkb:PATH)")
    return f"{PKB_PREFIX}{Path(suite[len(PKB_PREFIX):]).resolve()}::{problem}"


def load(ref: str) -> Problem:
    if ref.startswith(PKB_PREFIX):
        root, _, pid = ref[len(PKB_PREFIX):].rpartition("::")
        return load_pkb(Path(root), pid)
    return load_problem(ref)


def pkb_ids(root: Path) -> list[str]:
    return sorted((p.stem for p in (root / "reference").glob("*.py")), key=lambda s: (int(s.split("_")[0]) if s.split("_")[0].isdigit() else 1 << 30, s))


def load_pkb(root: Path, pid: str) -> Problem:
    ref_dir = root / "reference"
    if not ref_dir.is_dir():
        raise ProblemError(f"{root}: not a ParallelKernelBench checkout (no reference/ folder)")
    matches = [s for s in pkb_ids(root) if s == pid or s.split("_")[0] == pid]
    if len(matches) != 1:
        raise ProblemError(f"{ref_dir}: no single problem {pid!r} (found {len(matches)}; ids: {', '.join(pkb_ids(root)[:10])} ...)")
    stem = matches[0]
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    spec = importlib.util.spec_from_file_location(f"pkb_reference_{stem}", ref_dir / f"{stem}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    from utils.input_output_tensors import create_input_tensor  # the checkout's own generator

    number = int(stem.split("_")[0]) if stem.split("_")[0].isdigit() else 0

    def make_inputs(rank, world_size, seed, device="cpu", size=1.0):
        side = max(16, int(1024 * math.sqrt(size)) // 16 * 16)
        out = create_input_tensor(rank, world_size, number, base_shape=(side, side), dtype=torch.bfloat16, trial=seed, device=device)
        return tuple(out) if isinstance(out, (list, tuple)) else (out,)

    meta = Meta(
        id=stem, name=stem.split("_", 1)[-1].replace("_", " "), category="other",
        source_repo="togethercomputer/ParallelKernelBench", source_file=f"reference/{stem}.py",
        source_function="solution", atol=1e-2, rtol=1e-2, strict_dtype=False, tags=("pkb",),
    )
    return Problem(meta, module, make_inputs, module.solution, None, str(ref_dir / f"{stem}.py"))
