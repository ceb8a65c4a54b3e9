"""pass@k, fast_p and geometric-mean speedup: the numbers a report prints.

pass@k is the unbiased estimator of Chen et al. (2021): with n samples of which c are correct,
1 - C(n-c, k) / C(n, k), computed as a stable product. fast_p is the share of problems whose
candidate is correct AND more than p times faster than the reference (KernelBench's metric;
p = 0 is plain correctness, p = 1 is "correct and faster").
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence


def pass_at_k(n: int, c: int, k: int) -> float:
    if not 0 <= c <= n or k < 1:
        raise ValueError(f"pass@k needs 0 <= c <= n and k >= 1 (got n={n}, c={c}, k={k})")
    if k > n:
        raise ValueError(f"pass@{k} needs at least {k} samples, got {n}")
    if n - c < k:
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def mean_pass_at_k(samples: Iterable[tuple[int, int]], k: int) -> float:
    """Average pass@k over problems, each given as (n, c)."""
    values = [pass_at_k(n, c, k) for n, c in samples]
    return sum(values) / len(values) if values else 0.0


def fast_p(results: Sequence[tuple[bool, float | None]], p: float) -> float:
    """Share of `results` (one (correct, speedup) per problem) correct with speedup > p."""
    if not results:
        return 0.0
    hits = sum(1 for ok, s in results if ok and (p <= 0 or (s is not None and s > p)))
    return hits / len(results)


def geomean_speedup(speedups: Iterable[float]) -> float | None:
    """Geometric mean of positive speedups; None when there are none."""
    vals = [s for s in speedups if s is not None and s > 0]
    if not vals:
        return None
    return math.exp(sum(math.log(s) for s in vals) / len(vals))
