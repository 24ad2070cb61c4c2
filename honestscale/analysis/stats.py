"""Statistics of repeated measurements (Hoefler & Belli, SC15): each named, each computed once.

* the centre of a set of runs' times is their **median**, with a distribution-free (order-statistic)
  95 % interval (rule 5); the centre of their rates is the **harmonic mean** (rule 3: the rate of the
  total work, not the arithmetic mean of rates);
* a **speedup** or an efficiency is a ratio of two such statistics; its interval is the interval of the
  ratio, from a bootstrap over the repetitions of both points (never error bars at the base case, whose
  speedup is 1 by definition);
* the interval of a **harmonic mean** of rates is a bootstrap over the runs (it has no order statistic);
* the **MLPerf score** drops the fastest and the slowest runs (how many: the benchmark catalogue) and averages
  the rest (a run that did not converge = infinitely slow);
* two sets of runs are called **different** by one decision rule (rule 7, ``DECISION_RULE``) over the evidence
  printed beside them: the two-sided Mann-Whitney U test at 5 %, the 95 % interval of their ratio, and the sides'
  own intervals; where the evidence disagrees, "the tests disagree" and no difference is claimed; no interval of a
  side or of a ratio below ``MIN_INTERVAL_RUNS`` runs a side;
* whether the **ranks** of one run step at different paces: the Kruskal-Wallis H test over their step times
  (rule 10);
* **Amdahl** (strong scaling) and **Gustafson** (weak) laws, fitted to speedups by least squares, and
  only where there are more points than the one the base case fixes.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from statistics import harmonic_mean, median
from typing import Any

import numpy as np

CI_LEVEL = 0.95
CI_METHOD = "order statistics (binomial), 95 %: the interval between the k-th smallest and k-th largest runs"
RATIO_METHOD = (
    "bootstrap over the repetitions of both points (2,000 resamples, percentile 95 %), only where each has 6 runs "
    "or more (fewer support no interval)"
)
BOOTSTRAP = 2000

# The names every output uses for its statistics (summary, report, advise say the same words).
TIME_STATISTIC = "median of runs"
RATE_STATISTIC = "harmonic mean of runs"


def median_ci(values: Sequence[float], level: float = CI_LEVEL) -> tuple[float | None, float | None]:
    """Distribution-free CI of the median: ranks from the binomial(n, 1/2) quantiles; None when n is too small."""
    from scipy import stats  # imported when used: it costs every command half a second

    xs = sorted(values)
    n = len(xs)
    if n == 0:
        return None, None
    alpha = 1 - level
    k = int(stats.binom.ppf(alpha / 2, n, 0.5))  # number of values below the lower bound
    if k < 1 or n - k < k:
        return None, None  # too few runs: no interval reaches the level (see HS202)
    lo, hi = xs[k - 1], xs[n - k]
    coverage = stats.binom.cdf(n - k, n, 0.5) - stats.binom.cdf(k - 1, n, 0.5)
    return (lo, hi) if coverage >= level - 1e-9 else (None, None)


# The fewest runs a side needs for any 95 % interval of its own or of a ratio with another side: the fewest whose
# median has an order-statistic interval reaching 95 % (the 1st and 6th of 6 cover 96.9 %). A constant, so that
# importing this module does not import scipy; tests/unit/test_comparisons.py checks it against median_ci.
MIN_INTERVAL_RUNS = 6


def interval_within(values: Sequence[float], fraction: float) -> tuple[bool, float | None]:
    """Whether the 95 % interval of the median lies within ``fraction`` of the median on both sides (SC15 §4.2.2),
    and how far it reaches (the larger side over the median; None while there are too few values for one)."""
    lo, hi = median_ci(values)
    m = centre_of_times(values)
    if lo is None or hi is None or not m:
        return False, None
    reach = max(m - lo, hi - m) / m
    return reach <= fraction + 1e-12, reach


SIGNIFICANCE = 0.05
PERMUTATIONS = 9999  # up to this many arrangements of two samples, tied ones are tested exactly
DECISION_RULE = (
    "two sets of runs differ when every piece of evidence printed beside them that decides says so: the two-sided "
    "Mann-Whitney U test at 5 % (exact for small samples, ties included), the 95 % interval of their ratio (it "
    "excludes 1) and, where both sides have one, their own 95 % intervals (disjoint ones say the sides differ; "
    "overlapping ones are no evidence either way); they show no significant difference when the test and the "
    "ratio's interval both say so; "
    "when the evidence disagrees, the tests disagree and no difference is claimed; with too few runs for any of "
    "them, too few runs to tell"
)
TEST_METHOD = "two-sided Mann-Whitney U test at 5 % (exact for small samples, ties included)"
# the verdicts of ``Difference.verdict``
DIFFER, SAME, DISAGREE, TOO_FEW = "differ", "no significant difference", "the tests disagree", "too few runs"


@dataclass(frozen=True)
class Difference:
    """Whether two sets of runs differ (SC15 rule 7), decided by one rule (``DECISION_RULE``) from the evidence that
    is printed beside it: Mann-Whitney U, the interval of the ratio of the two statistics, and the sides' own
    intervals (of the statistic printed: medians of times, harmonic means of rates)."""

    n_a: int
    n_b: int
    p_value: float | None  # None when a side has no value
    a_ci: tuple[float | None, float | None]
    b_ci: tuple[float | None, float | None]
    ratio: Estimate | None = (
        None  # the ratio of the two sides' statistics printed beside this (either way round)
    )

    @property
    def intervals_overlap(self) -> bool | None:
        """None when a side has too few runs for an interval."""
        (al, ah), (bl, bh) = self.a_ci, self.b_ci
        if None in (al, ah, bl, bh):
            return None
        return not (al > bh or bl > ah)  # type: ignore[operator]

    @property
    def test_reaches(self) -> bool:
        """Whether the sample sizes let Mann-Whitney reach 5 % at all (its smallest p is 2 / C(n_a+n_b, n_a))."""
        if self.n_a == 0 or self.n_b == 0 or self.p_value is None:
            return False
        return 2 / math.comb(self.n_a + self.n_b, self.n_a) < SIGNIFICANCE

    def evidence(self) -> list[tuple[str, bool | None]]:
        """Each piece of evidence there is, as (what it says, whether it says the sides differ; None: neither)."""
        out: list[tuple[str, bool | None]] = []
        if self.test_reaches:
            differs = self.p_value is not None and self.p_value < SIGNIFICANCE
            out.append(
                (f"Mann-Whitney p = {self.p_value:.3g}" + (" < 0.05" if differs else " ≥ 0.05"), differs)
            )
        r = self.ratio
        if r is not None and r.has_interval:
            inside = r.low <= 1 <= r.high  # type: ignore[operator]
            out.append((f"the ratio's 95 % interval {_g(r.low)}-{_g(r.high)} "
                        + ("holds 1" if inside else "excludes 1"), not inside))  # fmt: skip
        overlap = self.intervals_overlap
        if overlap is not None:
            out.append(("the sides' 95 % intervals " + ("overlap" if overlap else "are disjoint"),
                        None if overlap else True))  # fmt: skip
        return out

    @property
    def verdict(self) -> str:
        """``differ``, ``no significant difference``, ``the tests disagree`` or ``too few runs`` (DECISION_RULE)."""
        said = [d for _, d in self.evidence() if d is not None]
        if not said:
            return TOO_FEW
        if all(said):
            return DIFFER
        if not any(said):
            return SAME
        return DISAGREE

    @property
    def significant(self) -> bool:
        return self.verdict == DIFFER

    @property
    def disagree(self) -> bool:
        return self.verdict == DISAGREE

    @property
    def testable(self) -> bool:
        """Whether any evidence can decide (a test that can reach 5 %, or an interval)."""
        return self.verdict != TOO_FEW

    def describe(self) -> str:
        """'significant difference (n = 6 and 6: Mann-Whitney p = 0.002 < 0.05; the ratio's 95 % interval 1.6-3.7
        excludes 1; ...)', 'the tests disagree (...)', 'no significant difference (...)' or 'too few runs to tell'."""
        n = f"n = {self.n_a} and {self.n_b}"
        verdict = self.verdict
        if verdict == TOO_FEW:
            smallest = 2 / math.comb(self.n_a + self.n_b, self.n_a) if self.n_a and self.n_b else 1.0
            return (f"too few runs to tell ({n}: Mann-Whitney's smallest p is {smallest:.2g}, not below "
                    f"{SIGNIFICANCE}, and no interval with fewer than {MIN_INTERVAL_RUNS} runs a side)")  # fmt: skip
        words = {
            DIFFER: "significant difference",
            SAME: "no significant difference",
            DISAGREE: "the tests disagree",
        }
        said = "; ".join(text for text, _ in self.evidence())
        tail = ": no difference is claimed" if verdict == DISAGREE else ""
        return f"{words[verdict]} ({n}: {said}){tail}"


def _g(x: float | None) -> str:
    return "?" if x is None else f"{x:.3g}"


def differ(
    a: Sequence[float], b: Sequence[float], statistic: str = "median", ratio: Estimate | None = None
) -> Difference:
    """Two-sided Mann-Whitney U test of ``a`` against ``b`` (scipy's ``mannwhitneyu``: exact for small samples,
    by permutation where they hold ties), with each side's 95 % interval of ``statistic`` (``median``: order
    statistics; ``hmean``: bootstrap) and ``ratio``, the ratio of the two statistics as it is printed beside them."""
    from scipy import stats  # imported when used: it costs every command half a second

    xa, xb = [float(v) for v in a], [float(v) for v in b]
    p = None
    if xa and xb:
        if len(set(xa) | set(xb)) == 1:
            p = 1.0  # all equal: no test can tell them apart
        else:
            # tied small samples: the exact permutation distribution (scipy's default there is the normal
            # approximation, which calls 3 equal runs against 3 others different at p = 0.047; exactly it is 0.1)
            exact = len(set(xa + xb)) < len(xa + xb) and math.comb(len(xa) + len(xb), len(xa)) <= PERMUTATIONS
            method: Any = stats.PermutationMethod(n_resamples=PERMUTATIONS) if exact else "auto"
            p = float(stats.mannwhitneyu(xa, xb, alternative="two-sided", method=method).pvalue)
    ci = {"median": median_ci, "hmean": hmean_ci}[_statistic(statistic)]
    return Difference(len(xa), len(xb), p, ci(xa), ci(xb), ratio)


def _statistic(name: str) -> str:
    """``name`` where it is a statistic of repetitions this module computes; a misspelt one is refused, never taken
    for the median."""
    if name not in ("median", "hmean"):
        raise ValueError(f"statistic {name!r}: median (times) or hmean (rates)")
    return name


@dataclass(frozen=True)
class RankSpread:
    """Whether a run's ranks step at different paces (Kruskal-Wallis over their step times) and its straggler."""

    ranks: int
    p_value: float | None  # None with one rank, or when every step time is equal
    slowest_rank: int | None
    excess: float | None  # slowest rank's median step over the median of the ranks' medians, minus 1

    @property
    def differ(self) -> bool:
        return self.p_value is not None and self.p_value < SIGNIFICANCE


def rank_spread(step_times: Mapping[int, Sequence[float]]) -> RankSpread:
    """Kruskal-Wallis H test over the ranks' step times (scipy's), the slowest rank and its excess."""
    from scipy import stats  # imported when used: it costs every command half a second

    groups = {r: [float(v) for v in vs] for r, vs in step_times.items() if len(vs) > 0}
    if len(groups) < 2:
        return RankSpread(len(groups), None, None, None)
    medians = {r: median(vs) for r, vs in groups.items()}
    slowest = max(medians, key=lambda r: (medians[r], -r))
    centre = median(medians.values())
    excess = medians[slowest] / centre - 1 if centre > 0 else None
    values = [v for vs in groups.values() for v in vs]
    p = None
    if len(set(values)) > 1:
        p = float(stats.kruskal(*groups.values()).pvalue)
    return RankSpread(len(groups), p, slowest, excess)


def mlperf_score(times: Sequence[float | None], drop: int = 1) -> float | None:
    """MLPerf's olympic score: drop the ``drop`` fastest and ``drop`` slowest runs, mean of the rest.

    A run that did not converge (None) counts as infinitely slow, so it is among the slowest dropped; with
    more non-converged runs than ``drop``, or fewer than ``2 * drop + 1`` runs, there is no score.
    """
    vals = [math.inf if t is None else t for t in times]
    if len(vals) < 2 * drop + 1:
        return None
    kept = sorted(vals)[drop : len(vals) - drop]
    m = sum(kept) / len(kept)
    return None if math.isinf(m) else m


def centre_of_times(values: Sequence[float]) -> float | None:
    """The median of the runs' times (None for no run)."""
    return median(values) if values else None


def centre_of_rates(values: Sequence[float]) -> float | None:
    """The harmonic mean of the runs' rates (None for no run)."""
    vals = [v for v in values if v > 0]
    return harmonic_mean(vals) if vals else None


@dataclass(frozen=True)
class Estimate:
    """A ratio (speedup, efficiency) with its 95 % interval, or no interval when a side has one run."""

    value: float
    low: float | None = None
    high: float | None = None

    @property
    def has_interval(self) -> bool:
        return self.low is not None and self.high is not None

    def above(self, bound: float) -> bool:
        """Above ``bound`` beyond the interval (the interval's low end is above it)."""
        return self.low is not None and self.low > bound

    def below(self, bound: float) -> bool:
        return self.high is not None and self.high < bound

    def scaled(self, factor: float) -> Estimate:
        return Estimate(
            self.value * factor,
            None if self.low is None else self.low * factor,
            None if self.high is None else self.high * factor,
        )

    def inverse(self) -> Estimate:
        """1 / the ratio, its interval's ends swapped (a slowdown as a speedup)."""
        return Estimate(1 / self.value, None if self.high is None else 1 / self.high,
                        None if self.low is None else 1 / self.low)  # fmt: skip

    def overlaps(self, other: Estimate) -> bool:
        if not (self.has_interval and other.has_interval):
            return True
        return not (self.low > other.high or other.low > self.high)  # type: ignore[operator]


def _hmean_rows(a: Any) -> Any:
    return a.shape[1] / np.sum(1.0 / a, axis=1)


def resampled(values: Sequence[float], statistic: str, draws: int, rng: Any) -> Any:
    """The statistic (``median`` of times, ``hmean`` of rates) of ``draws`` resamples of the values with
    replacement: one column of a bootstrap."""
    if statistic not in ("hmean", "median"):
        raise ValueError(f"no such statistic to resample: {statistic!r} (hmean or median)")
    a = np.asarray(values, dtype=float)
    rows = a[rng.integers(0, a.size, size=(draws, a.size))]
    return _hmean_rows(rows) if statistic == "hmean" else np.median(rows, axis=1)


def hmean_ci(values: Sequence[float], seed: int = 0) -> tuple[float | None, float | None]:
    """95 % interval of the harmonic mean of rates: percentile bootstrap over the runs (None below
    ``MIN_INTERVAL_RUNS``: a bootstrap of fewer runs is narrower than they can support)."""
    a = np.asarray([v for v in values if v > 0], dtype=float)
    if a.size < MIN_INTERVAL_RUNS:
        return None, None
    draws = _hmean_rows(a[np.random.default_rng(seed).integers(0, a.size, size=(BOOTSTRAP, a.size))])
    return float(np.percentile(draws, 2.5)), float(np.percentile(draws, 97.5))


def ratio(
    num: Sequence[float], den: Sequence[float], statistic: str = "median", seed: int = 0
) -> Estimate | None:
    """stat(num) / stat(den) with a percentile bootstrap interval over both sets of repetitions.

    ``statistic`` is ``median`` (times) or ``hmean`` (rates). No interval when either side has fewer than
    ``MIN_INTERVAL_RUNS`` values (where a side has no interval of its own, neither has their ratio: a bootstrap
    over 2 x 2 runs is far narrower than two runs can support); None when a side is empty or its statistic is not
    positive.
    """
    return _ratio(tuple(float(x) for x in num if x is not None and x > 0),
                  tuple(float(x) for x in den if x is not None and x > 0), statistic, seed)  # fmt: skip


@functools.lru_cache(maxsize=4096)
def _ratio(num: tuple[float, ...], den: tuple[float, ...], statistic: str, seed: int) -> Estimate | None:
    """``ratio`` of values already kept, memoised: one speedup is read by the report, HS209, HS211, HS212 and the
    laws alike, and its bootstrap (seeded, so the same for the same values) is drawn once."""
    a = np.asarray(num, dtype=float)
    b = np.asarray(den, dtype=float)
    if a.size == 0 or b.size == 0:
        return None
    rows: Callable[[Any], Any] = (
        _hmean_rows if _statistic(statistic) == "hmean" else (lambda m: np.median(m, axis=1))
    )
    value = float(rows(a[None, :])[0] / rows(b[None, :])[0])
    if a.size < MIN_INTERVAL_RUNS or b.size < MIN_INTERVAL_RUNS:
        return Estimate(value)
    rng = np.random.default_rng(seed)
    ra = rows(a[rng.integers(0, a.size, size=(BOOTSTRAP, a.size))])
    rb = rows(b[rng.integers(0, b.size, size=(BOOTSTRAP, b.size))])
    draws = ra / rb
    return Estimate(value, float(np.percentile(draws, 2.5)), float(np.percentile(draws, 97.5)))


# ------------------------------------------------------------------------------ Amdahl and Gustafson
LAWS = {"amdahl": "S(N) = 1 / ((1 - p) + p / N)", "gustafson": "S(N) = (1 - p) + p N"}


def law_speedup(law: str, p: Any, n: Any) -> Any:
    """The speedup the law predicts at ``n`` times the base case's workers."""
    if law == "gustafson":
        return (1 - p) + p * n
    return 1.0 / ((1 - p) + p / n)


def law_efficiency(law: str, p: float, n: float) -> float:
    return float(law_speedup(law, p, n)) / n


_GRID = np.linspace(0.0, 1.0, 1001)  # the search for Amdahl's p: a grid step, then a golden section within it
_GOLDEN = (math.sqrt(5) - 1) / 2


def _law_sse(law: str, p: Any, x: Any, y: Any) -> Any:
    """Sum of squared residuals of the law at p (one per row of y)."""
    return np.sum((y - law_speedup(law, p[:, None], x[None, :])) ** 2, axis=1)


def fit_law_rows(law: str, n: Any, speedups: Any) -> Any:
    """Least-squares parallel fraction p in [0, 1] of ``law`` through (n, speedup) for each row of ``speedups``
    (rows x len(n)): the bootstrap's thousands of fits at once, and the point estimate as one row.

    Gustafson's speedup is linear in p, so its bounded least squares is the clipped closed form. Amdahl's is
    searched on a grid of p (step 0.001) and refined by a golden section within one grid step of the best point
    (to 1e-9), every row at once; a row with a non-finite speedup gives nan.
    """
    x = np.asarray(n, dtype=float)
    y = np.atleast_2d(np.asarray(speedups, dtype=float))
    if law == "gustafson":
        d = x - 1.0
        p = np.clip(((y - 1.0) @ d) / float(d @ d), 0.0, 1.0)
    else:
        model = law_speedup(law, _GRID[:, None], x[None, :])  # grid x points
        sse = np.sum(y**2, axis=1)[:, None] - 2.0 * y @ model.T + np.sum(model**2, axis=1)[None, :]
        best = _GRID[np.argmin(sse, axis=1)]
        step = float(_GRID[1] - _GRID[0])
        lo, hi = np.clip(best - step, 0.0, 1.0), np.clip(best + step, 0.0, 1.0)
        for _ in range(40):
            a, b = hi - _GOLDEN * (hi - lo), lo + _GOLDEN * (hi - lo)
            left = _law_sse(law, a, x, y) <= _law_sse(law, b, x, y)
            hi, lo = np.where(left, b, hi), np.where(left, lo, a)
        p = (lo + hi) / 2
    return np.where(np.all(np.isfinite(y), axis=1), p, np.nan)


def fit_law(
    law: str, n: Sequence[float], speedups: Sequence[float], min_points: int = 3
) -> tuple[float, float | None] | None:
    """Least-squares parallel fraction p (and its standard error) of ``law`` through (n, speedup) points.

    None with fewer than ``min_points`` points or non-finite speedups. Three by default: the base case fixes
    one point, and two points give the p they imply without testing the law (``advise`` says so when it
    asks for two). The standard error is the least-squares one: the residual variance over the sum of the
    squared derivatives of the law in p (none with one degree of freedom short).
    """
    if len(n) < min_points or len(n) < 2:
        return None
    x = np.asarray(n, dtype=float)
    y = np.asarray(speedups, dtype=float)
    p = float(fit_law_rows(law, x, y[None, :])[0])
    if not math.isfinite(p):
        return None
    slope = x - 1.0 if law == "gustafson" else (1 - 1 / x) / (1 - p * (1 - 1 / x)) ** 2
    sse = float(_law_sse(law, np.asarray([p]), x, y[None, :])[0])
    curvature = float(slope @ slope)
    err = math.sqrt(sse / (len(x) - 1) / curvature) if curvature > 0 else None
    return p, err
