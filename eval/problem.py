"""The problem format: one small module per problem under eval/problems/.

A problem module defines

    META: Meta                       what it is and where it comes from
    make_inputs(rank, world_size, seed, device="cpu", size=1.0) -> tuple
                                     the positional inputs of one rank, random, deterministic
                                     in (rank, world_size, seed, size); `size` scales the
                                     default shapes (CI runs with small sizes on CPU)
    reference(*inputs)               plain PyTorch + torch.distributed; the process group is
                                     already initialised (NCCL on GPU, gloo on CPU)
    roofline(world_size, size=1.0) -> Roofline
                                     the fewest bytes over the links per rank, the fewest HBM
                                     bytes per rank and the FLOPs per rank, derived in a comment

and its docstring is the description shown to users and models. A candidate is one Python file
with `solution(*inputs)`, the reference's signature.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import torch

CATEGORIES = (
    "collective",
    "tensor",
    "sequence",
    "context",
    "data",
    "fsdp",
    "expert",
    "pipeline",
    "vocab",
    "inference",
    "graph",
    "vision",
    "science",
    "other",
)

# Default tolerances by output dtype: (atol, rtol). A problem may set its own.
TOLERANCES = {
    torch.bfloat16: (1e-2, 1e-2),
    torch.float16: (1e-3, 1e-3),
    torch.float32: (1e-4, 1e-4),
    torch.float64: (1e-8, 1e-8),
}


@dataclass(frozen=True)
class Meta:
    id: str
    name: str
    category: str
    source_repo: str  # e.g. "NVIDIA/Megatron-LM"
    source_file: str  # path inside that repository
    source_function: str  # the function or class the reference mirrors
    world_sizes: tuple[int, ...] = (2, 4, 8)
    dtype: str = "bfloat16"
    atol: float | None = None  # None: the dtype default of TOLERANCES
    rtol: float | None = None
    peer_memory: bool = True  # a fast solution is expected to use peer (symmetric) memory
    cpu_note: str = ""  # how the gloo path differs from NCCL, where it does
    strict_dtype: bool = True  # outputs must have the reference's dtype (False: compared as float)
    tags: tuple[str, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if self.category not in CATEGORIES:
            raise ValueError(f"problem {self.id}: unknown category {self.category!r} (one of {', '.join(CATEGORIES)})")


@dataclass(frozen=True)
class Roofline:
    """Per-rank lower bounds on the work a solution must do."""

    link_bytes: float  # bytes this rank must send (or receive, whichever is larger) over links
    hbm_bytes: float  # bytes this rank must read + write in its own HBM
    flops: float  # floating-point operations this rank must do

    def seconds(self, link_gbs: float, hbm_gbs: float, tflops: float) -> dict[str, float]:
        """The three lower-bound times; the largest is the roofline (they can overlap at best)."""
        t = {
            "link": self.link_bytes / (link_gbs * 1e9),
            "hbm": self.hbm_bytes / (hbm_gbs * 1e9),
            "compute": self.flops / (tflops * 1e12),
        }
        t["bound"] = max(t.values())
        return t


@dataclass
class Problem:
    meta: Meta
    module: ModuleType
    make_inputs: Callable[..., tuple]
    reference: Callable[..., Any]
    roofline: Callable[..., Roofline] | None  # None for imported suites without one
    path: str

    @property
    def id(self) -> str:
        return self.meta.id

    @property
    def description(self) -> str:
        return inspect.cleandoc(self.module.__doc__ or "")

    def tolerances(self, dtype: torch.dtype) -> tuple[float, float]:
        atol, rtol = TOLERANCES.get(dtype, (0.0, 0.0))
        return (self.meta.atol if self.meta.atol is not None else atol, self.meta.rtol if self.meta.rtol is not None else rtol)


class ProblemError(Exception):
    """A problem id that does not exist or a module that does not follow the format."""


def from_module(module: ModuleType) -> Problem:
    missing = [n for n in ("META", "make_inputs", "reference", "roofline") if not hasattr(module, n)]
    if missing:
        raise ProblemError(f"{module.__name__}: missing {', '.join(missing)}")
    return Problem(module.META, module, module.make_inputs, module.reference, module.roofline, module.__file__ or "")


def _modules() -> list[str]:
    import eval.problems as pkg

    return sorted(m.name for m in pkgutil.iter_modules(pkg.__path__) if not m.name.startswith("_"))


def load_problem(problem_id: str) -> Problem:
    if problem_id not in _modules():
        known = ", ".join(_modules())
        raise ProblemError(f"unknown problem {problem_id!r} (known: {known})")
    prob = from_module(importlib.import_module(f"eval.problems.{problem_id}"))
    if prob.meta.id != problem_id:
        raise ProblemError(f"eval/problems/{problem_id}.py: META.id is {prob.meta.id!r}, expected {problem_id!r}")
    return prob


def all_problems(category: str | None = None) -> list[Problem]:
    probs = [load_problem(name) for name in _modules()]
    return [p for p in probs if category is None or p.meta.category == category]


# Helpers for problem modules -------------------------------------------------------------------


def generator(seed: int, device: str | torch.device) -> torch.Generator:
    """A generator on `device` seeded with `seed` (draws on the device, no host round trip)."""
    g = torch.Generator(device=device)
    g.manual_seed(int(seed))
    return g


def randn(shape: tuple[int, ...], g: torch.Generator, dtype: torch.dtype, device, scale: float = 1.0) -> torch.Tensor:
    """Normal random values drawn in float32 on `device`, then cast (never constant, never zero)."""
    return (torch.randn(shape, generator=g, device=device, dtype=torch.float32) * scale).to(dtype)


def scaled(n: int, size: float, multiple: int = 1) -> int:
    """`n * size` rounded down to a multiple of `multiple`, at least `multiple`."""
    return max(multiple, int(n * size) // multiple * multiple)


_GROUPS: dict[tuple, tuple] = {}


def tp_dp_groups(tp: int):
    """(tp_group, dp_group) of this rank for a tensor x data parallel grid of `tp` consecutive
    ranks per tensor-parallel group. Created once per process (every rank must call this in the
    same order, as make_inputs does) and cached; tp must divide the world size."""
    import torch.distributed as dist

    w = dist.get_world_size()
    if w % tp:
        raise ValueError(f"tensor-parallel size {tp} does not divide world size {w}")
    key = ("tp_dp", w, tp)
    if key not in _GROUPS:
        rank = dist.get_rank()
        mine_tp = mine_dp = None
        for start in range(0, w, tp):  # every rank creates every group, in the same order
            g = dist.new_group(list(range(start, start + tp)))
            if start <= rank < start + tp:
                mine_tp = g
        for offset in range(tp):
            g = dist.new_group(list(range(offset, w, tp)))
            if rank % tp == offset:
                mine_dp = g
        _GROUPS[key] = (mine_tp, mine_dp)
    return _GROUPS[key]
