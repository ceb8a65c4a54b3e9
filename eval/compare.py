"""Output comparison and the tensor-tree helpers the checker's rank processes use."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch


def tree_map(fn: Callable[[torch.Tensor], Any], obj: Any) -> Any:
    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if isinstance(obj, (list, tuple)):
        return type(obj)(tree_map(fn, o) for o in obj)
    if isinstance(obj, dict):
        return {k: tree_map(fn, v) for k, v in obj.items()}
    return obj


def tensors(obj: Any) -> list[torch.Tensor]:
    out: list[torch.Tensor] = []
    tree_map(out.append, obj)
    return out


def layout(obj: Any) -> str:
    """What a CUDA graph captured over `obj` fixes: every tensor's shape and dtype, every other
    argument's value."""
    return repr(tree_map(lambda t: (tuple(t.shape), str(t.dtype)), obj))


def clone(obj: Any) -> Any:
    """A deep copy of every tensor of a tree; other leaves (groups, modules, numbers) shared."""
    return tree_map(lambda t: t.detach().clone().requires_grad_(t.requires_grad), obj)


def poison(obj: Any) -> None:
    """Overwrite every tensor of a tree with values no correct output contains (NaN, or an
    extreme integer), so that memory freed after it can never pass as a fresh result."""
    for t in tensors(obj):
        with torch.no_grad():
            if t.is_floating_point() or t.is_complex():
                t.data.fill_(float("nan"))
            elif t.dtype == torch.bool:
                t.data.logical_not_()
            else:
                t.data.fill_(torch.iinfo(t.dtype).min if t.dtype != torch.uint8 else 0xA5)


def compare(
    got: Any,
    want: Any,
    tolerances: Callable[[torch.dtype], tuple[float, float]],
    strict_dtype: bool = True,
    path: str = "",
) -> dict[str, Any] | None:
    """None if `got` matches `want` in structure, shape, dtype and values; else what differs.

    Floating tensors match when |got - want| <= atol + rtol * |want| everywhere, with the
    tolerances of want's dtype; a NaN or infinity in `got` never matches (unless `want` has the
    same infinity there). Integer and boolean tensors must be equal.
    """
    where = path or "output"
    if isinstance(want, torch.Tensor):
        if not isinstance(got, torch.Tensor):
            return {"message": f"{where}: expected a tensor, got {type(got).__name__}", "output_path": path}
        if tuple(got.shape) != tuple(want.shape):
            return {"message": f"{where}: shape {tuple(got.shape)}, expected {tuple(want.shape)}", "output_path": path}
        if strict_dtype and got.dtype != want.dtype:
            return {"message": f"{where}: dtype {got.dtype}, expected {want.dtype}", "output_path": path}
        g = got.detach().to(want.device)
        w = want.detach()
        if not (w.is_floating_point() or w.is_complex()):
            bad = g.to(w.dtype) != w
            diff = (g.double() - w.double()).abs() if w.numel() else w.double()
            atol = rtol = 0.0
        else:
            atol, rtol = tolerances(w.dtype)
            gf, wf = g.float(), w.float()
            diff = (gf - wf).abs()
            same_inf = torch.isinf(gf) & (gf == wf)
            diff = torch.where(same_inf, torch.zeros_like(diff), diff)
            bad = ~(diff <= atol + rtol * wf.abs())  # NaN compares False, so NaN is bad
            bad |= torch.isnan(gf) | (torch.isinf(gf) & ~same_inf)
        if not bool(bad.any()):
            return None
        flat = int(bad.reshape(-1).nonzero()[0, 0])
        index = [int(i) for i in torch.unravel_index(torch.tensor(flat), tuple(w.shape))] if w.dim() else []
        finite = torch.nan_to_num(diff.double(), nan=float("inf"))
        max_abs = float(finite.max())
        rel = finite / (w.double().abs() + 1e-12) if w.numel() else finite
        n_bad = int(bad.sum())
        return {
            "message": (
                f"{where}: {n_bad} of {w.numel()} elements out of tolerance (atol={atol:g}, rtol={rtol:g}); "
                f"first at {index}: got {g.reshape(-1)[flat].item():.6g}, expected {w.reshape(-1)[flat].item():.6g}"
            ),
            "max_abs_err": max_abs,
            "max_rel_err": float(rel.max()),
            "first_mismatch": index,
            "output_path": path,
        }
    if isinstance(want, (list, tuple)):
        if not isinstance(got, (list, tuple)) or len(got) != len(want):
            desc = f"{type(got).__name__} of {len(got)}" if isinstance(got, (list, tuple)) else type(got).__name__
            return {"message": f"{where}: expected a {type(want).__name__} of {len(want)}, got {desc}", "output_path": path}
        for i, (g, w) in enumerate(zip(got, want)):
            d = compare(g, w, tolerances, strict_dtype, f"{path}[{i}]")
            if d:
                return d
        return None
    if isinstance(want, dict):
        if not isinstance(got, dict) or set(got) != set(want):
            keys = sorted(map(str, got)) if isinstance(got, dict) else type(got).__name__
            return {"message": f"{where}: expected keys {sorted(map(str, want))}, got {keys}", "output_path": path}
        for k in want:
            d = compare(got[k], want[k], tolerances, strict_dtype, f"{path}[{k!r}]")
            if d:
                return d
        return None
    if isinstance(want, float) and isinstance(got, (int, float)):
        atol, rtol = tolerances(torch.float32)
        if abs(got - want) <= atol + rtol * abs(want):
            return None
        return {"message": f"{where}: {got!r}, expected {want!r}", "output_path": path}
    if got is want or (type(got) is type(want) and got == want):
        return None
    return {"message": f"{where}: {got!r} ({type(got).__name__}), expected {want!r} ({type(want).__name__})", "output_path": path}


def digest(t: torch.Tensor) -> list[float]:
    """Two numbers that change when any value of `t` does (float64 sums of values and squares):
    the judge and the candidate's process compare them to agree on a call's inputs."""
    x = torch.nan_to_num(t.detach().double(), nan=7.0, posinf=11.0, neginf=-13.0).reshape(-1)
    w = torch.arange(1, x.numel() + 1, dtype=torch.float64, device=x.device).remainder_(997).add_(1)
    return [float(x.sum()), float((x * w).sum())]


def sample(obj: Any, seed: int, limit: int = 1 << 16) -> Any:
    """`obj` with every tensor of more than `limit` elements replaced by `limit` of its elements
    at positions drawn from `seed` (flattened; the same positions on both sides of a check), and
    smaller tensors kept whole. A stale or skipped output differs almost everywhere, so checking
    a draw the candidate could not know in advance catches it at a fraction of the transfer."""
    count = [0]

    def pick(t: torch.Tensor) -> torch.Tensor:
        count[0] += 1
        if t.numel() <= limit:
            return t
        g = torch.Generator().manual_seed(seed * 7919 + count[0])
        idx = torch.randint(t.numel(), (limit,), generator=g).to(t.device)
        return t.reshape(-1)[idx]

    return tree_map(pick, obj)


def shapes(obj: Any) -> list[list[Any]]:
    """The shape and dtype of each tensor of a tree, in order."""
    return [[list(t.shape), str(t.dtype)] for t in tensors(obj)]
