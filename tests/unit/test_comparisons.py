"""Sound comparisons (SC15 rules 7 and 10): Mann-Whitney between configurations, Kruskal-Wallis across ranks.

The tests compare honestscale's numbers with scipy's own functions on the same samples, and check the
decisions taken from them (what is called different, what cannot be tested, which rank straggles).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sp

from honestscale.analysis import compare, ranks
from honestscale.analysis.stats import (
    MIN_INTERVAL_RUNS,
    Estimate,
    differ,
    hmean_ci,
    median_ci,
    rank_spread,
    ratio,
)
from tests.lint_campaigns import view_of

RNG = np.random.default_rng(7)


@pytest.mark.parametrize("shift", [0.0, 0.02, 0.2])
def test_mann_whitney_equals_scipys_on_the_same_samples(shift: float) -> None:
    a = list(RNG.normal(10.0, 0.3, 9))
    b = list(RNG.normal(10.0 * (1 + shift), 0.3, 7))
    got = differ(a, b)
    assert got.p_value == pytest.approx(sp.mannwhitneyu(a, b, alternative="two-sided").pvalue, rel=1e-12)
    assert (got.n_a, got.n_b) == (9, 7)
    if shift == 0.2:
        assert got.significant and "significant difference (n = 9 and 7: Mann-Whitney p = " in got.describe()
    if shift == 0.0:
        assert not got.significant and got.describe().startswith("no significant difference")


def test_tied_small_samples_get_the_exact_p_value_not_the_normal_approximation() -> None:
    # 3 equal runs against 3 others: every arrangement is equally likely, so p = 2 / C(6, 3) = 0.1 exactly;
    # scipy's default for tied data (the normal approximation) says 0.047 and would call them different
    got = differ([1.0, 1.0, 1.0], [2.0, 2.0, 2.0])
    assert got.p_value == pytest.approx(0.1)
    assert sp.mannwhitneyu([1.0] * 3, [2.0] * 3).pvalue < 0.05
    assert not got.significant
    assert differ([3.0] * 4, [3.0] * 4).p_value == 1.0


def test_non_overlapping_intervals_and_the_test_agree_on_a_difference() -> None:
    a = [10.0, 10.1, 10.2, 10.3, 10.4, 10.5]
    b = [11.0, 11.1, 11.2, 11.3, 11.4, 11.5]
    got = differ(a, b, "median", ratio(a, b))
    assert got.intervals_overlap is False and got.significant and got.verdict == "differ"
    assert "the ratio's 95 % interval" in got.describe() and "excludes 1" in got.describe()


def test_evidence_that_disagrees_is_said_to_and_claims_no_difference() -> None:
    """Mann-Whitney finds nothing while the ratio's interval excludes 1: no verdict is picked in silence."""
    a = [10.0, 10.2, 10.4, 10.6, 10.8, 11.0]
    b = [9.9, 10.1, 10.3, 10.5, 10.7, 10.9]
    got = differ(a, b, "median", Estimate(1.01, 1.002, 1.02))  # an interval as a bootstrap might give it
    assert got.p_value is not None and got.p_value > 0.05
    assert got.verdict == "the tests disagree" and not got.significant and got.testable
    text = got.describe()
    assert text.startswith("the tests disagree (n = 6 and 6: Mann-Whitney p = ") and "excludes 1" in text
    assert text.endswith("no difference is claimed")


def test_no_interval_from_fewer_than_six_runs_a_side() -> None:
    """Two runs a side support no interval of a side nor of their ratio (a bootstrap over 2 x 2 values would print
    one far narrower than two runs can support); six do."""
    assert MIN_INTERVAL_RUNS == next(n for n in range(1, 64) if median_ci(range(n)) != (None, None)) == 6
    five, six = [1.0, 1.1, 1.2, 1.3, 1.4], [1.0, 1.1, 1.2, 1.3, 1.4, 1.5]
    assert hmean_ci(five) == (None, None) and median_ci(five) == (None, None)
    assert None not in hmean_ci(six) and None not in median_ci(six)
    assert not ratio(five, six).has_interval and not ratio(six, five, "hmean").has_interval  # type: ignore[union-attr]
    assert ratio(six, six).has_interval  # type: ignore[union-attr]
    got = differ([1.0, 2.0], [3.0, 4.0], "median", ratio([1.0, 2.0], [3.0, 4.0]))
    assert (
        got.verdict == "too few runs"
        and not got.testable
        and got.describe().startswith("too few runs to tell")
    )


def test_kruskal_wallis_over_ranks_equals_scipys_and_names_the_straggler() -> None:
    steps = {r: list(RNG.normal(0.10, 0.004, 40)) for r in range(4)}
    steps[2] = list(RNG.normal(0.13, 0.004, 40))  # rank 2 is 30 % slower
    got = rank_spread(steps)
    assert got.p_value == pytest.approx(sp.kruskal(*steps.values()).pvalue, rel=1e-12)
    assert got.differ and got.slowest_rank == 2
    medians = sorted(float(np.median(v)) for v in steps.values())
    assert got.excess == pytest.approx(float(np.median(steps[2])) / ((medians[1] + medians[2]) / 2) - 1)
    assert ranks.RunRanks("r", got).straggler
    even = rank_spread({r: list(RNG.normal(0.10, 0.004, 40)) for r in range(4)})
    assert not ranks.RunRanks("r", even).straggler
    assert rank_spread({0: [0.1, 0.2]}).p_value is None  # one rank: nothing to compare


def test_orderings_of_a_series_and_of_frameworks(tmp_path) -> None:  # type: ignore[no-untyped-def]
    case = {"runs": [
        {"id": "base", "workers": 1, "ttt": 28_800.0},
        {"id": "near", "workers": 8, "ttt_by_rep": [27000.0, 31000.0, 28000.0, 30000.0, 28500.0, 29500.0]},
        {"id": "tf", "workers": 1, "framework": "tensorflow", "ttt": 14_400.0},
    ]}  # fmt: skip
    view = view_of(tmp_path, case)
    series = next(c for c in view.comparisons if c.kind == "scaling" and c.key["framework"] == "torch")
    (eight,) = compare.scaling(series.by_workers())
    assert (eight.a, eight.b, eight.measure) == ("8 workers", "1 worker", "time to accuracy")
    assert not eight.difference.significant and eight.testable
    assert eight.sentence().startswith("8 workers vs 1 worker in time to accuracy (")
    assert "): no significant difference (n = " in eight.sentence()
    fw = next(c for c in view.comparisons if c.kind == "framework")
    groups: dict[str, list] = {}  # type: ignore[type-arg]
    for r in fw.runs:
        groups.setdefault(r.framework or "?", []).append(r)
    (torch,) = compare.frameworks(groups)
    assert (torch.a, torch.b) == ("torch", "tensorflow") and torch.ratio == pytest.approx(2.0, rel=0.01)
    assert torch.difference.significant and "2.00x slower than tensorflow" in torch.sentence()
