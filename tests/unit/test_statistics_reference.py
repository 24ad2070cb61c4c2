"""Every statistic against a value computed another way: written out here with the standard library (order
statistics from binomial sums, the exact permutation distribution of U), against scipy's implementation of the same
method (its percentile bootstrap), or against a published worked example; never against honestscale's own helpers.
"""

from __future__ import annotations

import itertools
import math
import statistics

import numpy as np
import pytest
from scipy import stats as sp

from honestscale.analysis.stats import (
    BOOTSTRAP,
    MIN_INTERVAL_RUNS,
    differ,
    hmean_ci,
    median_ci,
    mlperf_score,
    ratio,
)


def _rng() -> np.random.Generator:
    """A generator of its own for each test: the values checked do not depend on which tests ran before."""
    return np.random.default_rng(20261202)


def _binom_cdf(k: int, n: int) -> float:
    """P(Binomial(n, 1/2) <= k), summed exactly."""
    return float(sum(math.comb(n, i) for i in range(k + 1))) / float(2**n)


def _order_statistic_interval(n: int, level: float = 0.95) -> tuple[int, int] | None:
    """The 1-based ranks (k, n - k + 1) of the narrowest symmetric order-statistic interval of the median whose
    coverage 1 - 2 P(B <= k - 1) reaches ``level`` (None: none does)."""
    best = None
    for k in range(1, n // 2 + 1):
        if 1 - 2 * _binom_cdf(k - 1, n) >= level:
            best = (k, n - k + 1)
    return best


@pytest.mark.parametrize("n", range(1, 41))
def test_the_medians_interval_is_the_order_statistics_the_binomial_gives(n: int) -> None:
    values = list(_rng().permutation(np.arange(100.0, 100.0 + n)))  # value i + 100 is the (i + 1)-th smallest
    ranks = _order_statistic_interval(n)
    got = median_ci(values)
    if ranks is None:
        assert got == (None, None) and n < MIN_INTERVAL_RUNS
    else:
        assert got == (99.0 + ranks[0], 99.0 + ranks[1])


@pytest.mark.parametrize(
    ("n", "ranks"),
    # the distribution-free 95 % interval of the median, as tabulated (Conover, Practical Nonparametric Statistics,
    # 3rd ed., table A3; Hollander & Wolfe): the 1st and 6th of 6 (96.9 %), 2nd and 9th of 10 (97.9 %), 6th and
    # 15th of 20 (95.9 %), 10th and 21st of 30 (95.7 %)
    [(6, (1, 6)), (10, (2, 9)), (20, (6, 15)), (30, (10, 21))],
)
def test_the_medians_interval_equals_the_published_table(n: int, ranks: tuple[int, int]) -> None:
    xs = sorted(_rng().lognormal(3.0, 0.5, n))
    assert median_ci(list(_rng().permutation(xs))) == (xs[ranks[0] - 1], xs[ranks[1] - 1])


def _bootstrap(values: np.ndarray, statistic: str, rng: np.random.Generator) -> list[float]:
    """``BOOTSTRAP`` resamples of ``values`` with replacement, each one's statistic by the standard library."""
    idx = rng.integers(0, values.size, size=(BOOTSTRAP, values.size))
    centre = statistics.harmonic_mean if statistic == "hmean" else statistics.median
    return [centre([float(values[i]) for i in row]) for row in idx]


def _percentile(draws: list[float], q: float) -> float:
    """The q-th percentile with linear interpolation between order statistics (numpy's default), written out."""
    xs = sorted(draws)
    at = (len(xs) - 1) * q / 100
    lo = math.floor(at)
    return xs[lo] + (xs[min(lo + 1, len(xs) - 1)] - xs[lo]) * (at - lo)


def test_the_harmonic_means_interval_is_the_percentile_bootstrap_written_out() -> None:
    rates = _rng().normal(1000.0, 80.0, 9)
    draws = _bootstrap(rates, "hmean", np.random.default_rng(0))
    assert hmean_ci(list(rates)) == pytest.approx(
        (_percentile(draws, 2.5), _percentile(draws, 97.5)), rel=1e-12
    )


def test_the_harmonic_means_interval_agrees_with_scipys_bootstrap() -> None:
    """scipy's percentile bootstrap of the harmonic mean, with 100 times the resamples: the ends agree within the
    Monte Carlo error of 2,000 resamples (5 % of the interval's width, some 3 standard errors of an end)."""
    rates = _rng().normal(500.0, 60.0, 12)
    lo, hi = hmean_ci(list(rates))
    ref = sp.bootstrap((rates,), sp.hmean, n_resamples=200_000, method="percentile", random_state=1)
    r_lo, r_hi = ref.confidence_interval
    width = r_hi - r_lo
    assert lo is not None and hi is not None
    assert abs(lo - r_lo) < 0.05 * width and abs(hi - r_hi) < 0.05 * width, ((lo, hi), (r_lo, r_hi))


@pytest.mark.parametrize("statistic", ["median", "hmean"])
def test_a_ratios_interval_is_the_bootstrap_of_both_sides_written_out(statistic: str) -> None:
    """stat(a) / stat(b) and its percentile interval over 2,000 paired resamples of both sides (a's resample
    drawn first, then b's, from one seeded generator)."""
    a, b = _rng().lognormal(4.0, 0.2, 7), _rng().lognormal(3.5, 0.3, 8)
    centre = statistics.harmonic_mean if statistic == "hmean" else statistics.median
    rng = np.random.default_rng(0)
    ra, rb = _bootstrap(a, statistic, rng), _bootstrap(b, statistic, rng)
    draws = [x / y for x, y in zip(ra, rb, strict=True)]
    got = ratio(list(a), list(b), statistic)
    assert got is not None
    assert got.value == pytest.approx(centre(list(a)) / centre(list(b)), rel=1e-12)
    assert (got.low, got.high) == pytest.approx(
        (_percentile(draws, 2.5), _percentile(draws, 97.5)), rel=1e-12
    )


def test_a_ratio_of_five_runs_has_no_interval_and_six_have() -> None:
    five, six = list(_rng().normal(10, 1, 5)), list(_rng().normal(10, 1, 6))
    assert not ratio(five, six).has_interval and not ratio(six, five).has_interval  # type: ignore[union-attr]
    assert ratio(six, six).has_interval  # type: ignore[union-attr]
    assert ratio([], six) is None and ratio([0.0, -1.0], six) is None  # no positive value: no statistic


def _exact_mann_whitney(a: list[float], b: list[float]) -> float:
    """The two-sided exact p-value of U over every split of the pooled values into groups of a's and b's sizes
    (ties given their mid-ranks), counted here: P(|U - mean| >= |u - mean|)."""
    pooled = a + b
    order = sorted(pooled)
    mid = {v: (order.index(v) + 1 + len(order) - order[::-1].index(v)) / 2 for v in set(pooled)}
    n_a = len(a)

    def u(group: tuple[int, ...]) -> float:
        return sum(mid[pooled[i]] for i in group) - n_a * (n_a + 1) / 2

    centre = n_a * len(b) / 2
    seen = abs(u(tuple(range(n_a))) - centre)
    splits = list(itertools.combinations(range(len(pooled)), n_a))
    return sum(abs(u(g) - centre) >= seen - 1e-9 for g in splits) / len(splits)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ([10.0, 11.0, 12.0], [13.0, 14.0, 15.0]),  # apart, no ties: 2 / C(6, 3) = 0.1
        ([10.0, 10.0, 12.0, 12.0], [12.0, 13.0, 13.0, 15.0]),  # ties across the sides
        ([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], [3.5, 4.5, 5.5, 6.5, 7.5, 8.5]),  # overlapping
        ([5.0, 5.0, 5.0], [5.0, 5.0, 6.0]),  # nearly all tied
        ([28.0, 29.0, 29.5, 30.0, 30.5, 31.0], [20.0, 20.1, 20.2, 20.3, 20.4, 28.5]),  # 6 against 6
    ],
)
def test_mann_whitney_equals_the_permutation_distribution_counted_out(a: list[float], b: list[float]) -> None:
    got = differ(a, b)
    assert got.p_value == pytest.approx(_exact_mann_whitney(a, b), abs=1e-9)


def test_mann_whitney_of_equal_samples_is_one() -> None:
    assert differ([3.0, 3.0, 3.0], [3.0, 3.0]).p_value == 1.0
    assert differ([], [1.0]).p_value is None


def test_mann_whitney_large_samples_equal_the_normal_approximation_written_out() -> None:
    """Beyond the exact range (no ties, n = 40 a side) the p-value is the normal approximation of U with the
    continuity correction, written out here: P(|Z| >= (|U - n_a n_b / 2| - 1/2) / sqrt(n_a n_b (n_a + n_b + 1) / 12))."""
    rng = _rng()
    a, b = list(rng.normal(10.0, 1.0, 40)), list(rng.normal(10.6, 1.0, 40))
    got = differ(a, b).p_value
    u = sum(1.0 for x in a for y in b if x > y)
    n = len(a) * len(b)
    z = (abs(u - n / 2) - 0.5) / math.sqrt(n * (len(a) + len(b) + 1) / 12)
    assert got == pytest.approx(math.erfc(z / math.sqrt(2)), rel=1e-9)


@pytest.mark.parametrize(
    ("times", "drop", "expected"),
    [
        ([5.0, 1.0, 3.0, 2.0, 4.0], 1, 3.0),  # drop 1 and 5: mean of 2, 3, 4
        ([10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 100.0], 1, 55.0),  # MLPerf's 10 runs
        ([10.0, None, 30.0, 40.0, 50.0], 1, 40.0),  # the run that did not converge is the slowest dropped
        ([10.0, None, None, 40.0, 50.0], 1, None),  # two not converged, one dropped: no score
        ([1.0, 2.0], 1, None),  # fewer than 2 * drop + 1 runs
        ([1.0, 2.0, 3.0], 1, 2.0),  # exactly 2 * drop + 1
        ([1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0], 2, 28 / 3),  # drop 2 a side: 4, 8, 16
    ],
)
def test_the_mlperf_score_is_the_olympic_mean(
    times: list[float | None], drop: int, expected: float | None
) -> None:
    got = mlperf_score(times, drop)
    assert got == (pytest.approx(expected) if expected is not None else None)
