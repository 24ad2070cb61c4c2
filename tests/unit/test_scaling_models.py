"""Scaling models: the PMNF search by leave-one-out cross-validation, the prediction's interval and its reach.

Expected values come from the formula the data were made with, or from a few lines of numpy in the test (a
weighted least-squares fold by ``np.linalg.lstsq``), never from the module's own helpers."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np
import pytest

from honestscale import extrap
from honestscale.analysis import pmnf, prediction

P = [4.0, 8.0, 16.0, 32.0, 64.0, 128.0]
TIME = prediction.Measure("time", "time to train", "s", "median of runs", (0.0, math.inf), ("amdahl",))


def test_an_exact_pmnf_series_is_recognised_with_its_coefficients() -> None:
    y = [50 + 3000 * p**0.5 * math.log2(p) for p in P]
    best = pmnf.select(P, y, 256)[0]
    assert (best.model.hypothesis.kind, best.model.hypothesis.i, best.model.hypothesis.j) == (
        "pmnf",
        Fraction(1, 2),
        1,
    )
    assert best.model.c0 == pytest.approx(50, rel=1e-6) and best.model.c1 == pytest.approx(3000, rel=1e-9)
    assert best.cv_error < 1e-9
    assert float(best.model(256)) == pytest.approx(50 + 3000 * 16 * 8, rel=1e-9)


def test_amdahls_law_on_a_strong_series_keeps_its_parts_at_or_above_zero() -> None:
    y = [20 + 800 / p for p in P]
    best = pmnf.select(P, y, 1024, candidates=pmnf.hypotheses(("amdahl",)))[0]
    assert best.model.name() == "Amdahl's law"
    assert best.model.c0 == pytest.approx(20) and best.model.c1 == pytest.approx(800)
    # a series that slows down with the workers: the law's parallel part cannot go below 0
    slower = pmnf.fit(pmnf.Hypothesis("amdahl"), np.asarray(P), np.asarray([10 + 0.1 * p for p in P]))
    assert slower is not None and slower.c0 >= 0 and slower.c1 >= 0


def test_leave_one_out_errors_equal_a_refit_without_each_point() -> None:
    p = np.asarray([2.0, 4.0, 8.0, 16.0, 32.0])
    y = np.asarray([900.0, 520.0, 260.0, 170.0, 95.0])
    h = pmnf.Hypothesis("pmnf", Fraction(-1, 2), -1)
    expected = []
    for k in range(p.size):
        keep = np.arange(p.size) != k
        x = p[keep] ** -0.5 / np.log2(p[keep])
        a = np.column_stack([1 / y[keep], x / y[keep]])  # relative residuals: each row over its value
        c, *_ = np.linalg.lstsq(a, np.ones(keep.sum()), rcond=None)
        expected.append((c[0] + c[1] * p[k] ** -0.5 / math.log2(p[k])) / y[k] - 1)
    got = pmnf.score_rows(h, p, y[None, :], 32.0, (0.0, math.inf))
    assert got.fold_errors[0] == pytest.approx(expected, rel=1e-9)
    assert got.cv_error[0] == pytest.approx(np.mean(np.abs(expected)), rel=1e-9)


def test_a_model_that_leaves_the_bounds_before_the_target_is_no_candidate() -> None:
    p = [1.0, 2.0, 4.0, 8.0]
    y = [100 - 10 * math.log2(x) for x in p]  # an exact log model, at 0 by 1,024 workers
    log_term = pmnf.Hypothesis("pmnf", Fraction(0), 1)
    assert pmnf.select(p, y, 8, candidates=[log_term])[0].cv_error < 1e-9
    assert pmnf.select(p, y, 2048, candidates=[log_term]) == [], "a time at or below 0 at 2,048 workers"
    share = prediction.Measure("comm_share", "share", "", "median of runs", (0.0, 1.0), ())
    got = prediction.predict(share, {w: [0.1 * math.log2(w) + 0.3] * 6 for w in (2, 4, 8, 16)}, 1024)
    assert got.value is None or 0 < got.value <= 1
    assert got.high is None or got.high <= 1


def _noisy(rng: np.random.Generator, truth: list[float], runs: int) -> dict[int, list[float]]:
    return {int(p): list(t * np.exp(rng.normal(0, 0.03, runs))) for p, t in zip(P, truth, strict=True)}


def test_the_interval_holds_the_truth_of_a_noisy_series_at_the_next_scale() -> None:
    """Property: series drawn from known models with 3 % noise and six runs per scale, each predicted one doubling
    past its data: the truth inside the 95 % interval at least 90 % of the time."""
    rng = np.random.default_rng(7)
    inside = []
    for k in range(30):
        c0, c1 = rng.uniform(5, 50), rng.uniform(500, 5000)
        kind = k % 3

        def model(p: float, c0: float = c0, c1: float = c1, kind: int = kind) -> float:
            return float([c0 + c1 / p, c1 * p**-0.8, c0 + c1 * p**-0.5 / math.log2(p)][kind])

        got = prediction.predict(TIME, _noisy(rng, [model(p) for p in P], 6), 256, draws=200, seed=k)
        assert got.low is not None and got.high is not None and got.low <= got.value <= got.high  # type: ignore[operator]
        inside.append(got.low <= model(256) <= got.high)
    assert sum(inside) / len(inside) >= 0.9, inside


def test_reach_and_scales_decide_whether_a_prediction_may_be_quoted() -> None:
    rng = np.random.default_rng(1)
    series = _noisy(rng, [20 + 800 / p for p in P], 6)
    assert prediction.predict(TIME, series, 256).quote
    far = prediction.predict(TIME, series, 1024)
    assert not far.quote and any("8 times beyond" in r for r in far.reasons)
    three = prediction.predict(TIME, {w: series[w] for w in (4, 8, 16)}, 32)
    assert not three.quote and any("3 worker counts" in r for r in three.reasons)
    two = prediction.predict(TIME, {w: series[w] for w in (4, 8)}, 16)
    assert two.value is None and two.refused and "at least 3" in two.refused
    few = prediction.predict(TIME, {w: v[:5] for w, v in series.items()}, 256)
    assert any("not resampled" in r for r in few.reasons), (
        "fewer than 6 runs: their spread is not in the interval"
    )


def test_the_extrap_export_has_one_line_per_run_in_extra_ps_keys() -> None:
    series = {4: [10.0, 11.0], 8: [6.0]}
    got = [json.loads(line) for line in extrap.lines([("bert on dgx", "time", series)])]
    assert got == [
        {"params": {"p": 4}, "callpath": "bert on dgx", "metric": "time", "value": 10.0},
        {"params": {"p": 4}, "callpath": "bert on dgx", "metric": "time", "value": 11.0},
        {"params": {"p": 8}, "callpath": "bert on dgx", "metric": "time", "value": 6.0},
    ]
