"""Metrics against values computed by hand."""

import math

import pytest

from eval.metrics import fast_p, geomean_speedup, mean_pass_at_k, pass_at_k


@pytest.mark.parametrize(
    "n, c, k, want",
    [
        (10, 0, 1, 0.0),
        (10, 10, 5, 1.0),
        (10, 3, 1, 0.3),  # c / n
        (5, 2, 2, 1 - (3 * 2) / (5 * 4)),  # 1 - C(3,2)/C(5,2) = 1 - 3/10 = 0.7
        (3, 1, 3, 1.0),  # n - c = 2 < k
        (3, 1, 2, 1 - 1 / 3),  # 1 - C(2,2)/C(3,2)
        (200, 13, 10, 1 - math.comb(187, 10) / math.comb(200, 10)),
    ],
)
def test_pass_at_k(n, c, k, want):
    assert pass_at_k(n, c, k) == pytest.approx(want, abs=1e-12)


def test_pass_at_k_rejects_nonsense():
    for n, c, k in ((3, 4, 1), (3, 1, 0), (2, 1, 3), (3, -1, 1)):
        with pytest.raises(ValueError):
            pass_at_k(n, c, k)


def test_mean_pass_at_k():
    assert mean_pass_at_k([(3, 0), (3, 3), (3, 1)], 1) == pytest.approx((0 + 1 + 1 / 3) / 3)
    assert mean_pass_at_k([], 1) == 0.0


def test_fast_p():
    res = [(True, 2.5), (True, 0.8), (False, 3.0), (True, None), (True, 1.0)]
    assert fast_p(res, 0) == pytest.approx(4 / 5)  # correctness only
    assert fast_p(res, 1.0) == pytest.approx(1 / 5)  # strictly faster: only 2.5
    assert fast_p(res, 0.5) == pytest.approx(3 / 5)  # 2.5, 0.8, 1.0
    assert fast_p(res, 2.5) == 0.0
    assert fast_p([], 1) == 0.0


def test_geomean():
    assert geomean_speedup([2.0, 8.0]) == pytest.approx(4.0)
    assert geomean_speedup([0.5, 2.0, 1.0]) == pytest.approx(1.0)
    assert geomean_speedup([]) is None
