"""Decisions of the judges that mutation testing (scripts/mutation) found no test pinning, each pinned by a value
worked out by hand or by construction."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from honestscale.analysis import ranks
from honestscale.analysis.efficiency import Factors
from honestscale.analysis.stats import Estimate
from honestscale.analysis.steady import mser5

RNG = np.random.default_rng(78)


def test_the_inverse_of_a_ratio_swaps_and_inverts_its_interval() -> None:
    got = Estimate(2.0, 1.6, 2.5).inverse()
    assert (got.value, got.low, got.high) == (0.5, 0.4, 0.625)
    assert Estimate(4.0).inverse() == Estimate(0.25)


def _factors(hardware: float, statistical: float, speedup: float) -> Factors:
    return Factors(8, 1, 6, 0.01, (None, None), 1e6, (None, None), Estimate(hardware), Estimate(statistical),
                   Estimate(speedup))  # fmt: skip


def test_a_factor_below_one_is_said_as_slower_by_its_inverse() -> None:
    said = _factors(0.5, 0.8, 0.625).sentence()
    assert said.startswith("8x the workers made each sample 2.00x slower")
    assert "and needed only 0.80x the samples" in said and "time to accuracy 1.60x slower" in said
    said = _factors(1.25, 1.5, 0.83).sentence()
    assert "each sample 1.25x faster (no interval" in said and "but needed 1.50x the samples" in said


def test_two_rank_runs_are_summarised_with_their_straggler() -> None:
    """A run of 2 ranks has ranks to compare (more than one); rank 1 30 % slower over 40 steps is its straggler,
    its excess over the median of the two ranks' medians 0.13 / 0.115 - 1 = 13 %."""
    times = {0: list(RNG.normal(0.10, 0.002, 40)), 1: list(RNG.normal(0.13, 0.002, 40))}
    spreads = ranks.of_runs({"two": times, "one": {0: list(RNG.normal(0.1, 0.002, 40))}})
    got = ranks.summarise(["two", "one"], spreads)
    assert got["runs"] == 1 and got["differ"] == 1
    (straggler,) = got["stragglers"]
    assert straggler["run_id"] == "two" and straggler["rank"] == 1
    assert straggler["excess"] == pytest.approx(0.13 / 0.115 - 1, abs=0.01)


@pytest.mark.parametrize("seed", range(5))
def test_mser5_finds_the_warm_up_of_noisy_steps(seed: int) -> None:
    """20 steps settling from 3x, then 180 steady steps with 2 % noise: MSER-5's marginal standard error (the sum
    of squares over (k - d)^2) is least just past the warm-up, never at its bound."""
    rng = np.random.default_rng(seed)
    warm = [0.1 * (1 + 2 * (20 - i) / 20) for i in range(20)]
    times = warm + list(0.1 * (1 + 0.02 * rng.standard_normal(180)))
    warmup, why = mser5(times)
    assert warmup is not None and 15 <= warmup <= 30, why


def test_a_difference_of_times_gives_each_side_the_medians_order_statistic_interval() -> None:
    """``differ`` of times: each side's interval is its median's (the 1st and 6th of 6), not a bootstrap's."""
    from honestscale.analysis.stats import differ

    a, b = [10.0, 11.0, 12.0, 13.0, 14.0, 15.0], [20.0, 21.0, 22.0, 23.0, 24.0, 26.0]
    got = differ(a, b, "median")
    assert (got.a_ci, got.b_ci) == ((10.0, 15.0), (20.0, 26.0))
    rates = differ(a, b, "hmean")  # rates: the harmonic mean's bootstrap, inside the range of the runs
    assert rates.a_ci != (10.0, 15.0) and 10.0 < rates.a_ci[0] < rates.a_ci[1] < 15.0  # type: ignore[operator]


@pytest.mark.parametrize(("text", "fraction"), [("5%", 0.05), ("5 %", 0.05), ("0.05", 0.05), ("250%", 2.5)])
def test_a_gates_threshold_reads_as_a_fraction(text: str, fraction: float) -> None:
    from honestscale.compare._gate import parse_threshold

    assert parse_threshold(text, "--fail-slower") == pytest.approx(fraction)


@pytest.mark.parametrize("text", ["five", "5%%", "-1%", "1000%", "nan"])
def test_a_gates_threshold_out_of_range_or_not_a_number_is_refused(text: str) -> None:
    from honestscale.compare._gate import parse_threshold
    from honestscale.errors import HonestscaleError

    with pytest.raises(HonestscaleError, match="--fail-slower"):
        parse_threshold(text, "--fail-slower")


def test_a_measure_of_no_value_is_nan_not_zero() -> None:
    from honestscale.analysis.prediction import Measure
    from honestscale.analysis.stats import RATE_STATISTIC, TIME_STATISTIC

    time = Measure("time", "time to train", "s", TIME_STATISTIC, (0.0, float("inf")), ())
    rate = Measure("throughput", "throughput", "samples/s", RATE_STATISTIC, (0.0, float("inf")), ())
    assert np.isnan(time.centre([])) and np.isnan(rate.centre([]))
    assert time.centre([1.0, 2.0, 9.0]) == 2.0 and rate.centre([1.0, 2.0, 4.0]) == pytest.approx(12 / 7)


def test_a_points_quality_and_rates_are_its_runs_median_and_harmonic_means(tmp_path: Path) -> None:
    """A point of the careful campaign (8 workers, 6 runs of varied accuracy and speed): its accuracy is the median
    of the runs' final values, its throughput their harmonic mean and per worker that over 8, worked out here."""
    import statistics

    from honestscale.analysis.points import point
    from tests.lint_campaigns import view_of

    case = {"runs": [{"id": "base", "workers": 1, "ttt": 28_800.0},
                     {"id": "big", "workers": 8, "reps": 3, "test_acc": 0.750, "step_s_by_rep": [0.40, 0.42, 0.44]},
                     {"id": "big2", "workers": 8, "reps": 3, "test_acc": 0.771, "step_s_by_rep": [0.50, 0.41, 0.43]}]}  # fmt: skip
    view = view_of(tmp_path, case)
    runs = [r for r in view.runs if r.workers == 8]
    got = point(8, runs, view.fractions, mlperf=False)
    finals = [r.final_value for r in runs if r.final_value is not None]
    rates = [r.throughput for r in runs if r.throughput]
    assert len(finals) == len(rates) == 6 and len(set(rates)) > 1 and sorted(set(finals)) == [0.750, 0.771]
    assert got.accuracy == pytest.approx(statistics.median(finals))
    assert got.throughput == pytest.approx(statistics.harmonic_mean(rates))
    assert got.per_worker == pytest.approx(statistics.harmonic_mean(rates) / 8)
