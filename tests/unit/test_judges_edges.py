"""Decisions of the analysis that the third mutation sample (docs/benchmarks.md, seed 2026) found no unit test
pinning, each pinned by a value worked out by hand, by construction or by scipy: energy from NVML counters and
power, the laws' fits and their standard errors, the steady state's edges, the predictions' words, the points'
verdicts and scores, the FLOP counts of a grouped-query model."""

from __future__ import annotations

import math
import statistics
import warnings
from fractions import Fraction
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import numpy as np
import pytest
from scipy import optimize

from honestscale.analysis import efficiency, energy, flops, forecast, pmnf, points, prediction, steady
from honestscale.analysis.compare import Ordering
from honestscale.analysis.laws import LawFit, _project
from honestscale.analysis.mlperf import submissions
from honestscale.analysis.repetitions import precision
from honestscale.analysis.stats import differ, fit_law, interval_within, rank_spread, resampled
from honestscale.view import EnergyRecord, PowerSample, Run


def _run(**fields: Any) -> Run:
    """A run with only the fields a function reads (the others absent: reading one fails the test)."""
    return cast(Run, SimpleNamespace(**fields))


# ---- energy -----------------------------------------------------------------------------------------------


def test_a_counter_outside_its_readings_is_extended_by_the_power_at_that_end() -> None:
    """Readings at 10 s and 20 s (100 J, 300 J; 5 W then 50 W): 10 s before the first, the counter is 100 - 5 x 10
    = 50 J (the first reading's power, not the last's); 10 s after the last, 300 + 50 x 10 = 800 J."""
    assert energy._at([10.0, 20.0], [100.0, 300.0], [5.0, 50.0], 0.0) == 50.0
    assert energy._at([10.0, 20.0], [100.0, 300.0], [5.0, 50.0], 30.0) == 800.0


def test_a_counter_without_power_is_extended_by_its_own_slope_and_a_lone_reading_stays() -> None:
    """No power: two readings give the slope (300 - 100) / 10 = 20 W, so 10 s after the last, 500 J; one reading
    gives no slope (0 W): 100 J at any time."""
    assert energy._at([10.0, 20.0], [100.0, 300.0], [None, None], 30.0) == 500.0
    assert energy._at([10.0, 20.0], [100.0, 300.0], [None, None], 5.0) == 0.0
    assert energy._at([10.0], [100.0], [None], 20.0) == 100.0


def _nvml(
    rank: int, times: list[float], joules: list[float | None], watts: list[float | None]
) -> list[PowerSample]:
    return [PowerSample(rank, 0, t, w, j) for t, j, w in zip(times, joules, watts, strict=True)]


def test_energy_between_two_times_is_the_counters_difference_summed_over_ranks() -> None:
    """Two ranks' counters rising 100 J/s and 50 J/s over 0-10 s: 2-8 s is 600 + 300 = 900 J, from the counters
    (no power reading: a power integral would give none)."""
    ts = [float(t) for t in range(11)]
    run = _run(ranks_seen=2, power=_nvml(0, ts, [100.0 * t for t in ts], [None] * 11)
               + _nvml(1, ts, [50.0 * t for t in ts], [None] * 11))  # fmt: skip
    got = energy.between(run, 2.0, 8.0)
    assert got is not None
    assert got.joules == pytest.approx(900.0) and got.source == energy.COUNTER
    assert [(rank, round(j, 6)) for rank, j in got.per_rank] == [(0, 600.0), (1, 300.0)]


def test_energy_from_power_alone_is_its_integral() -> None:
    """Power only, 200 W flat on one rank: 2-8 s is 1200 J, named as power x time."""
    ts = [float(t) for t in range(11)]
    got = energy.between(_run(ranks_seen=1, power=_nvml(0, ts, [None] * 11, [200.0] * 11)), 2.0, 8.0)
    assert got is not None and got.joules == pytest.approx(1200.0) and got.source == energy.POWER


def test_a_record_with_one_end_unknown_has_no_window_and_no_source_is_not_recorded() -> None:
    record = EnergyRecord(
        "codecarbon", None, None, "n1", 1, None, 50.0, 10.0, "measured", "", "emissions.csv:2"
    )
    assert energy._window(record) is None
    assert energy.source([]) == energy.NOT_RECORDED


# ---- the laws and the fits -----------------------------------------------------------------------------------


def test_amdahls_fit_and_its_standard_error_equal_scipys_least_squares() -> None:
    """Three worker counts are enough for a fit (the default); p and its standard error are scipy's curve_fit
    (one parameter: the residual variance over n - 1, over the squared derivatives of the law)."""
    n, s = [1.0, 2.0, 4.0, 8.0], [1.0, 1.78, 3.05, 4.55]
    got = fit_law("amdahl", n, s)
    assert got is not None and got[1] is not None
    (p,), cov = optimize.curve_fit(lambda x, p: 1 / ((1 - p) + p / x), n, s, p0=[0.9])
    assert got[0] == pytest.approx(p, abs=1e-6)
    assert got[1] == pytest.approx(math.sqrt(cov[0][0]), rel=1e-3)
    assert fit_law("amdahl", n[:3], s[:3]) is not None


def test_a_law_projection_without_an_interval_says_both_of_its_bounds_are_unknown() -> None:
    """Fewer runs a point than a bootstrap needs: no interval, and each projected row's low and high are None."""
    out = LawFit("amdahl", "speedup", [(1, 1.0), (2, 1.8), (4, 3.1)], parallel_fraction=0.9)
    _project(out, {1: [100.0], 2: [55.0], 4: [32.0]}, [1, 2, 4], 200)
    assert out.interval is None
    assert [(r["workers"], r["low"], r["high"]) for r in out.projected] == [(8, None, None), (16, None, None),
                                                                            (32, None, None)]  # fmt: skip


def test_a_resample_of_an_unknown_statistic_is_refused() -> None:
    with pytest.raises(ValueError, match="HMEAN"):
        resampled([1.0, 2.0], "HMEAN", 10, np.random.default_rng(0))


# ---- intervals, ranks, the steady state ------------------------------------------------------------------------


def test_too_few_values_for_an_interval_are_never_within_any_fraction() -> None:
    assert interval_within([10.0, 11.0], 0.5) == (False, None)


def test_of_two_ranks_equally_slow_the_lower_is_named() -> None:
    assert rank_spread({0: [1.0, 1.0, 2.0], 1: [1.0, 1.0, 2.0]}).slowest_rank == 0


def test_the_mean_of_too_few_steps_for_batches_is_still_given() -> None:
    """Nine steps: no batch means, no interval, but their mean (0.2 s)."""
    mean, low, high, batches = steady.batch_means_interval([0.2] * 9)
    assert mean == pytest.approx(0.2) and (low, high, batches) == (None, None, 0)


def test_a_run_with_no_steady_state_keeps_the_warm_up_it_marked() -> None:
    got = steady.of_steps([0.1] * 10, 3)
    assert got.warmup_steps is None and got.marked_warmup == 3 and got.as_json()["marked_warmup_steps"] == 3


# ---- predictions -------------------------------------------------------------------------------------------


def test_a_prediction_past_the_largest_worker_count_is_that_far_outside_in_log2() -> None:
    p = np.asarray([1.0, 2.0, 4.0, 8.0])
    assert prediction._distance(32, p) == 2.0 and prediction._distance(0.5, p) == 1.0
    assert prediction._distance(3, p) == 0.0


def test_a_models_formula_names_its_sign_and_a_constant_its_value() -> None:
    assert pmnf.Model(pmnf.Hypothesis("constant"), 3.0, 0.0).formula() == "3"
    assert pmnf.Model(pmnf.Hypothesis("amdahl"), 1210.0, 30000.0).formula() == "1210 + 3e+04 · 1/p"
    assert pmnf.Model(pmnf.Hypothesis("amdahl"), 1210.0, -30000.0).formula() == "1210 - 3e+04 · 1/p"


def test_a_models_values_where_its_term_is_infinite_are_nan_with_no_numpy_warning() -> None:
    """``log2(0)`` is -inf, and 0 x -inf is NaN: the value is unknown, and numpy is not let to warn about it."""
    h = pmnf.Hypothesis("pmnf", Fraction(0), 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = pmnf.values(h, np.asarray([1.0]), np.asarray([0.0]), np.asarray([0.0]), np.asarray([0.0, 2.0]))
    assert math.isnan(got[0][0]) and got[0][1] == 1.0


def test_a_communication_share_is_predicted_as_a_median_and_a_refusal_says_why() -> None:
    assert forecast._measure("comm_share", "time to train", "strong").statistic == "median of runs"
    refused = prediction.Prediction("time", "time to train", "s", "median", 16, [1, 2], {1: 3, 2: 3},
                                    refused="fewer than 3 worker counts")  # fmt: skip
    assert forecast._prediction_lines(refused) == [
        "  time to train (median) at 16 workers: no prediction: fewer than 3 worker counts"
    ]
    bare = prediction.Prediction("time", "time to train", "s", "median", 16, [1, 2, 4], {1: 3, 2: 3, 4: 3},
                                 value=12.0, model="12", model_kind="constant", quote=True)  # fmt: skip
    assert forecast._prediction_lines(bare)[0] == "  time to train (median) at 16 workers: 12 s, no interval"


# ---- points, their verdicts and their scores ------------------------------------------------------------------


def _finding(code: str, outcome: str, severity: str, runs: list[str], suppressed: bool = False) -> Any:
    return {"code": code, "outcome": outcome, "severity": severity, "runs": runs,
            "suppressed": {"reason": "known"} if suppressed else None}  # fmt: skip


def test_a_points_verdicts_fold_each_rule_into_its_worst_outcome() -> None:
    """HS101 fails at error severity; HS102 fails and cannot be verified (a fail); HS103 is suppressed; HS101's
    suppressed twin does not hide its fail; a finding about another run is not the point's."""
    found = [
        _finding("HS101", "fail", "error", ["a"]),
        _finding("HS102", "cannot_verify", "warning", ["a"]),
        _finding("HS102", "fail", "warning", ["a"]),
        _finding("HS103", "fail", "warning", ["a"], suppressed=True),
        _finding("HS101", "fail", "error", ["a"], suppressed=True),
        _finding("HS104", "fail", "error", ["b"]),
    ]
    assert points.lint_codes(found, {"a"}) == {
        "fail": ["HS101", "HS102"],
        "cannot_verify": [],
        "error": ["HS101"],
        "suppressed": ["HS103"],
    }


def test_a_points_communication_is_what_its_timed_runs_measured() -> None:
    a, b = _run(id="a"), _run(id="b")
    assert points._comm(4, [a, b], cast(Any, {"a": {"comm_measured": True}})) == "measured"
    assert points._comm(4, [a, b], {}) == "not recorded"


def test_a_points_quality_names_its_split() -> None:
    ok = [
        _run(final_value=v, final_metric="accuracy", final_split="validation", mlperf=None)
        for v in (0.7, 0.8)
    ]
    accuracy, split, metric, _ = points._quality(ok)
    assert accuracy == pytest.approx(0.75) and (split, metric) == ("validation", "accuracy")


def test_an_mlperf_points_score_is_the_olympic_mean_times_its_factor() -> None:
    runs = [
        _run(time_to_train_s=t, ok=True, mlperf={"scaling_factor": 2.0})
        for t in (10.0, 11.0, 12.0, 13.0, 100.0)
    ]
    score, factor, official = points._mlperf_scores(runs)
    assert (score, factor, official) == (12.0, 2.0, 24.0)


def test_a_unet3d_submission_drops_four_runs_at_each_end() -> None:
    """40 runs of i^2 s (i = 1..40): the mean of 5^2..36^2, as result_summarizer.py drops 4 a side for unet3d
    (with 1 a side it would be the mean of 2^2..39^2)."""
    runs = [_run(id=f"mlperf:v1.0/org/sys/unet3d/result_{i}.txt", source="mlperf", ok=True,
                 time_to_train_s=float(i * i), mlperf={"benchmark": "unet3d"}) for i in range(1, 41)]  # fmt: skip
    (got,) = submissions(runs)
    assert got.drop == 4 and got.score_s == pytest.approx(statistics.mean(i * i for i in range(5, 37)))


def test_an_orderings_json_names_both_sides() -> None:
    d = differ([10.0, 11.0, 12.0], [20.0, 21.0, 22.0], "median")
    got = Ordering("2 workers", "1 worker", "time to train", 11.0, 21.0, d).as_json()
    assert (got["a"], got["b"], got["ratio"]) == ("2 workers", "1 worker", pytest.approx(11 / 21))


def test_a_configurations_precision_keeps_its_fraction_and_cap(tmp_path: Path) -> None:
    from tests.lint_campaigns import view_of

    view = view_of(tmp_path, {"runs": [{"id": "base", "workers": 1, "reps": 6, "ttt": 100.0}]})
    got = precision(view.runs, 0.05, 20)
    assert (got.runs, got.timed, got.fraction, got.cap) == (6, 6, 0.05, 20)


# ---- efficiency factors ----------------------------------------------------------------------------------------


def test_samples_to_target_of_a_run_that_logs_epochs_is_epochs_times_its_training_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Reached at t = 50 after 3 epochs of 1,000 samples, no samples count logged: 3,000 samples."""
    monkeypatch.setattr(efficiency, "reached_at", lambda run: 50.0)
    evals = [SimpleNamespace(time=50.0, split="validation", samples_trained=None, epoch=3)]
    assert efficiency.samples_to_target(_run(evals=evals, mlperf=None, train_size=1000)) == 3000.0


def test_a_series_factors_are_the_ratios_to_its_base(monkeypatch: pytest.MonkeyPatch) -> None:
    """At 4 workers each sample takes 0.3 of the base's time and needs 1.2x its samples: hardware 1/0.3, statistical
    1.2, both beside the base's 1 (which has no interval), and the point's time per sample its median."""
    per_sample = {f"b{i}": 1.0 + 0.01 * i for i in range(6)} | {f"w{i}": 0.3 + 0.01 * i for i in range(6)}
    needed = {f"b{i}": 1000.0 for i in range(6)} | {f"w{i}": 1200.0 for i in range(6)}
    monkeypatch.setattr(efficiency, "time_per_sample", lambda r: per_sample[r])
    monkeypatch.setattr(efficiency, "samples_to_target", lambda r: needed[r])
    monkeypatch.setattr(efficiency, "time_to_accuracy", lambda r: per_sample[r] * needed[r])
    monkeypatch.setattr(efficiency, "_values", lambda runs, f: [f(r) for r in runs])
    base, four = [f"b{i}" for i in range(6)], [f"w{i}" for i in range(6)]
    got = efficiency.factors(cast(dict[int, list[Run]], {1: base, 4: four}))
    assert [f.workers for f in got] == [1, 4]
    assert got[0].hardware is not None and got[0].hardware.value == 1.0
    assert got[1].time_per_sample_s == pytest.approx(statistics.median(per_sample[r] for r in four))
    assert got[1].statistical is not None and got[1].statistical.value == pytest.approx(1.2)


# ---- FLOP counts ------------------------------------------------------------------------------------------------


def _model(**changes: Any) -> Run:
    fields: dict[str, Any] = {"model_shape": {"layers": 2, "hidden": 4096, "heads": 32, "kv_heads": 8,
                                              "ffn_hidden": 11008}, "params_active": None,
                              "params_total": 500_000_000, "params_embedding": 0, "sequence_length": 2048,
                              "tokens_per_s": 1000.0, "flops_per_token": None, "tool_claims": None}  # fmt: skip
    return _run(**(fields | changes))


def test_a_grouped_query_models_parameters_count_its_smaller_key_value_projections() -> None:
    """d_kv = 8 x 4096 / 32 = 1024: each layer 2 d^2 + 2 d d_kv + 2 d ffn (SwiGLU-less count of honestscale)."""
    got = flops.shape_params(_model())
    d, kv, ffn = 4096, 1024, 11008
    assert got is not None and got.from_shape == 2 * (2 * d * d + 2 * d * kv + 2 * d * ffn)


def test_counts_say_why_an_embedding_as_large_as_the_model_leaves_none() -> None:
    got = flops.counts(_model(params_embedding=500_000_000))
    assert got == (None, ("params_embedding (not below params_total)",))
    zero = flops.counts(_model(sequence_length=0))[0]
    assert zero is not None and zero.sequence == 0


def test_a_run_with_a_rate_but_no_counts_has_no_mfu_to_audit() -> None:
    assert flops.audited(_model(model_shape={})) is False


# ---- the rules' words and edges ---------------------------------------------------------------------------------


def test_a_setup_difference_names_its_field_in_words_and_needs_both_sides() -> None:
    from honestscale.lint.rules.hs209_superlinear_speedup import _setup_difference

    def runs(gbs: int | None) -> list[Run]:
        return [_run(value=lambda field, v=gbs: v)]

    point: Any = SimpleNamespace(workers=8)
    got = _setup_difference(runs(1024), runs(2048), point, "global_batch_size")
    assert got is not None and got.setup
    assert got.text == "different global batch size: 1024 at the base, 2048 at 8 workers"
    assert _setup_difference(runs(1024), runs(None), point, "global_batch_size") is None


def test_two_factors_under_study_are_listed_apart() -> None:
    from honestscale.lint.rules.hs214_confounded_comparison import confounded

    factor = [{"name": "framework", "a": ["torch"], "b": ["tensorflow"]},
              {"name": "precision", "a": ["fp32"], "b": ["bf16"]}]  # fmt: skip
    message, _ = confounded(factor, [{"name": "cpu", "a": ["x"], "b": ["y"]}], [])
    assert message.startswith("besides the factor under study (framework, precision), 1 more thing(s) differ")


@pytest.mark.parametrize(("value", "direction"), [(1.11, 1), (1.05, 0), (0.95, 0), (0.89, -1)])
def test_a_speedup_without_an_interval_points_somewhere_only_beyond_ten_percent(
    value: float, direction: int
) -> None:
    from honestscale.analysis.stats import Estimate
    from honestscale.lint.rules.hs211_time_to_train_contradicts_throughput import _direction, _say

    assert _direction(Estimate(value)) == direction
    assert _say(Estimate(value)) == f"{value:.2f}x"
    assert _say(Estimate(value, 0.8, 1.3)) == f"{value:.2f}x (95 % CI 0.80-1.30)"


def test_repetitions_that_say_the_same_are_one_finding_even_with_short_run_ids() -> None:
    """Runs ``a`` and ``b`` (an ``a`` is in "claimed" too): one finding naming both, its words as each said them."""
    from honestscale.lint._engine import Finding
    from honestscale.lint.rules.hs107_highest_ops_numbers import _merged

    said = "the claimed MFU 40 % cannot be recomputed: params_total not recorded"
    found = [Finding("HS107", "warning", "cannot_verify", "config:c", [r], f"{r}: {said}", {}, "record it")
             for r in ("b", "a")]  # fmt: skip
    (got,) = _merged(found)
    assert got.runs == ["a", "b"] and got.message == f"2 runs (a, b): {said}"
    (alone,) = _merged(found[:1])
    assert alone.message == f"b: {said}"


# ---- the fourth sample's survivors ---------------------------------------------------------------------------


def test_steps_in_batches_of_a_whole_number() -> None:
    """250 steps: min(30, max(10, 250 // 20)) = 12 batches of 20 (250 / 20 would be 12.5 batches)."""
    assert steady.batch_means_interval([0.2 + 0.001 * (i % 7) for i in range(250)])[3] == 12


def test_two_disjoint_intervals_are_said_to_be() -> None:
    said = dict(
        differ(
            [10.0, 10.1, 10.2, 10.3, 10.4, 10.5], [20.0, 20.1, 20.2, 20.3, 20.4, 20.5], "median"
        ).evidence()
    )
    assert said["the sides' 95 % intervals are disjoint"] is True


def test_logs_that_do_not_say_how_they_ended_are_named_each() -> None:
    from honestscale.lint.rules.hs206_failed_runs_dropped import end_untold

    cut = [_run(imported={"stop": "the console ends early"}), _run(imported={"stop": "no summary row"})]
    message, _ = end_untold(cut)
    assert message.endswith("ended (no summary row; the console ends early)")


def test_one_ranks_log_names_its_source_where_the_importer_names_no_tool() -> None:
    from honestscale.lint.rules.hs215_one_rank_reported_for_all import one_rank

    run = _run(imported={"ranks_in_log": "last"}, source="megatron-lm", world_size=8,
               ranks=SimpleNamespace(stepped=[7]))  # fmt: skip
    message, _ = one_rank([run])
    assert "(megatron-lm: last)" in message


def test_the_time_outside_the_steps_reads_only_successful_runs_with_steps() -> None:
    from honestscale.lint.rules.hs211_time_to_train_contradicts_throughput import _outside

    timed = _run(ok=True, steps=SimpleNamespace(step_time_s=60.0), time_to_train_s=100.0)
    failed = _run(ok=False, steps=None, time_to_train_s=100.0)
    assert _outside([timed, failed]) == pytest.approx(0.4)


def test_a_trend_too_small_to_matter_leaves_a_steady_state() -> None:
    """200 steps rising 1 % over the run under 1 % noise (seeded): Spearman's p of the batch means far below 0.01,
    but the first and the last third differ by about 0.7 %, below DRIFT (5 %): steady, never "keep rising"."""
    from scipy import stats

    rng = np.random.default_rng(4)
    times = [0.1 * (1 + 0.01 * i / 200 + 0.01 * rng.standard_normal()) for i in range(200)]
    start, verdict = steady.mser5(times)
    assert start is not None, verdict
    rest = np.asarray(times).reshape(40, 5).mean(axis=1)[start // 5 :]
    assert stats.spearmanr(np.arange(len(rest)), rest)[1] < steady.TREND_P  # a trend, too small to matter
    third = len(rest) // 3
    assert abs(rest[-third:].mean() - rest[:third].mean()) / rest.mean() < steady.DRIFT


def test_a_points_energy_per_sample_is_the_median_of_its_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each run's joules per sample (here 1.0 to 6.0, one a repetition): the point's is their median, 3.5."""
    from tests.lint_campaigns import view_of

    view = view_of(tmp_path, {"runs": [{"id": "base", "workers": 1, "reps": 6}]})
    per_sample = {r.id: float(i) for i, r in enumerate(sorted(view.runs, key=lambda r: r.id), 1)}
    monkeypatch.setattr(energy, "per_sample_j", lambda r: per_sample[r.id])
    got = points.point(1, list(view.runs), view.fractions, mlperf=False)
    assert got.energy_per_sample_j == pytest.approx(3.5)


def test_amdahls_fraction_interval_is_the_2_5_and_97_5_percentiles_of_refits_by_scipy() -> None:
    """Six runs a point at 1, 2 and 4 workers; the bootstrap resamples each point's runs (numpy's generator seeded 0,
    each point in turn, as the analysis draws them), refits Amdahl's law to each draw with scipy's bounded scalar
    minimiser, and takes the 2.5th and 97.5th percentiles: the law's interval, to 1e-4."""
    samples = {1: [100.0, 101.0, 99.0, 100.5, 99.5, 100.2], 2: [56.0, 55.0, 57.5, 56.4, 55.8, 56.9],
               4: [33.0, 34.1, 32.5, 33.6, 34.4, 32.9]}  # fmt: skip
    ws, draws = [1, 2, 4], 400
    out = LawFit("amdahl", "speedup", [(1, 1.0), (2, 1.78), (4, 3.0)], parallel_fraction=0.88)
    _project(out, samples, ws, draws)
    rng = np.random.default_rng(0)
    centres = np.column_stack(
        [np.median(np.asarray(samples[w])[rng.integers(0, 6, size=(draws, 6))], axis=1) for w in ws]
    )
    speedups = centres[:, :1] / centres
    x = np.asarray(ws, dtype=float)

    def refit(s: np.ndarray) -> float:
        sse = lambda p: float(np.sum((s - 1 / ((1 - p) + p / x)) ** 2))  # noqa: E731
        return float(
            optimize.minimize_scalar(sse, bounds=(0.0, 1.0), method="bounded", options={"xatol": 1e-10}).x
        )

    fits = [refit(s) for s in speedups]
    assert out.interval is not None
    assert out.interval[0] == pytest.approx(np.percentile(fits, 2.5), abs=1e-4)
    assert out.interval[1] == pytest.approx(np.percentile(fits, 97.5), abs=1e-4)
