"""A measure predicted at a worker count from a scaling series, with an interval a reader can hold it to.

The model is :mod:`honestscale.analysis.pmnf`'s choice by leave-one-out cross-validation over the series' worker
counts, fitted to the centre of each count's repetitions (the median of times, the harmonic mean of rates). The
95 % interval covers what the series cannot pin down, in each of :data:`DRAWS` draws:

* the repetitions: each worker count's runs resampled with replacement (those with at least
  ``MIN_INTERVAL_RUNS``, as for every interval; a count with fewer keeps its centre, and the prediction says so);
* the model: chosen again on the resampled centres (among the :data:`SHORTLIST` best of the whole series), so a
  close second model's prediction is in the interval too;
* the model's own error: the chosen model's leave-one-out errors (each worker count predicted by the model fitted
  to the others), one drawn with either sign, in log units, grown in proportion to how far the prediction reaches
  past the series (log2 of the worker counts) beyond the reach of the series' own last step.

How far a prediction may be quoted is said on it (:data:`REACH`, :data:`QUOTE_SCALES`), never left to the reader.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from honestscale.analysis import pmnf
from honestscale.analysis.pmnf import Array
from honestscale.analysis.stats import (
    MIN_INTERVAL_RUNS,
    RATE_STATISTIC,
    centre_of_rates,
    centre_of_times,
    resampled,
)

DRAWS = 400
SHORTLIST = 12  # models re-chosen among in each draw: the best of the whole series by cross-validation
REACH = 2.0  # a prediction past this many times the largest worker count (or below the smallest over it) is no quote
QUOTE_SCALES = 4  # worker counts a quotable prediction needs
PLAUSIBLE = 2.0  # in a draw, any model within this many times the best's cross-validation error may be chosen


@dataclass(frozen=True)
class Measure:
    name: str  # time | step_time | throughput | comm_share
    text: str  # "time to train", "time per step", ...
    unit: str
    statistic: str  # "median of runs" | "harmonic mean of runs"
    bounds: tuple[float, float]
    laws: tuple[str, ...]  # the laws that describe it

    @property
    def rate(self) -> bool:
        """A rate, centred by the harmonic mean of runs (else the median, as for times and shares)."""
        return self.statistic == RATE_STATISTIC

    def centre(self, values: Sequence[float]) -> float:
        got = centre_of_rates(values) if self.rate else centre_of_times(values)
        return float("nan") if got is None else got


@dataclass
class Prediction:
    """One measure of one series at one worker count: the value, its 95 % interval, the model behind it, and
    whether it may be quoted."""

    measure: str
    text: str
    unit: str
    statistic: str
    at: int
    scales: list[int]  # the worker counts fitted
    runs: dict[int, int]  # runs behind each
    value: float | None = None
    low: float | None = None
    high: float | None = None
    model: str = ""  # its formula, coefficients in
    model_kind: str = ""  # PMNF, Amdahl's law, Gustafson's law, power law, constant
    cv_error: float | None = None  # the chosen model's mean absolute leave-one-out relative error
    runners_up: list[tuple[str, float]] = field(default_factory=list)  # the next models and their errors
    quote: bool = False
    reasons: list[str] = field(default_factory=list)  # why not to quote it; notes on the interval
    refused: str | None = None  # why there is no prediction at all


def _centres(measure: Measure, samples: dict[int, list[float]]) -> tuple[Array, Array]:
    ws = sorted(samples)
    return np.asarray(ws, dtype=float), np.asarray([measure.centre(samples[w]) for w in ws])


def _distance(at: float, p: Array) -> float:
    """How far ``at`` lies outside the worker counts, in log2 units (0 inside them)."""
    lo, hi = float(p.min()), float(p.max())
    return math.log2(at / hi) if at > hi else math.log2(lo / at) if at < lo else 0.0


def _last_step(p: Array) -> float:
    """The reach of the series' own outermost leave-one-out folds (log2 units): the widest of its two end gaps."""
    s = np.sort(p)
    return max(math.log2(s[-1] / s[-2]), math.log2(s[1] / s[0]))


def _beyond(p: Array, at: int) -> bool:
    """Past :data:`REACH` times the series' largest worker count, or below its smallest over it."""
    return bool(at > REACH * p.max() or at < p.min() / REACH)


def _reasons(p: Array, at: int, runs: dict[int, int]) -> list[str]:
    out = []
    if p.size < QUOTE_SCALES:
        out.append(
            f"fitted to {p.size} worker counts: a model chosen from fewer than {QUOTE_SCALES} is not tested"
        )
    if _beyond(p, at):
        out.append(
            f"{at} workers is {at / p.max() if at > p.max() else p.min() / at:.3g} times beyond the series "
            f"({int(p.min())} to {int(p.max())}): past {REACH:g} times its reach the model is untested"
        )
    few = sorted(w for w, n in runs.items() if n < MIN_INTERVAL_RUNS)
    if few:
        out.append(
            f"the runs at {', '.join(map(str, few))} workers (fewer than {MIN_INTERVAL_RUNS}) are not resampled: "
            "their spread is not in the interval"
        )
    return out


def _draws(
    measure: Measure,
    samples: dict[int, list[float]],
    at: int,
    shortlist: list[pmnf.Hypothesis],
    draws: int,
    seed: int,
) -> Array:
    """The prediction in each draw: repetitions resampled, the model chosen again, its own error drawn."""
    rng = np.random.default_rng(seed)
    ws = sorted(samples)
    p = np.asarray(ws, dtype=float)
    statistic = "hmean" if measure.rate else "median"
    centres = np.column_stack(
        [
            resampled(samples[w], statistic, draws, rng)
            if len(samples[w]) >= MIN_INTERVAL_RUNS
            else np.full(draws, measure.centre(samples[w]))
            for w in ws
        ]
    )
    scored = [pmnf.score_rows(h, p, centres, at, measure.bounds) for h in shortlist]
    cv = np.column_stack([r.cv_error for r in scored])  # draws x models
    cv = np.where(np.isfinite(cv), cv, np.inf)
    rows = np.arange(draws)
    # the model: any of those within PLAUSIBLE times the best's cross-validation error in this draw, at random
    plausible = cv <= PLAUSIBLE * np.min(cv, axis=1, keepdims=True)
    best = np.argmax(plausible * rng.random(cv.shape), axis=1)
    value = np.column_stack([r.at for r in scored])[rows, best]
    errors = np.stack([r.fold_errors for r in scored], axis=1)[rows, best]  # draws x worker counts
    drawn = np.abs(np.log1p(errors[rows, rng.integers(0, p.size, draws)]))
    grow = max(1.0, _distance(at, p) / _last_step(p))
    out = value * np.exp(drawn * np.where(rng.random(draws) < 0.5, 1.0, -1.0) * grow)
    out = np.where(np.isfinite(cv[rows, best]), out, np.nan)
    return np.minimum(out, measure.bounds[1]) if measure.bounds[1] < math.inf else out


def predict(
    measure: Measure,
    samples: dict[int, list[float]],
    at: int,
    draws: int = DRAWS,
    seed: int = 0,
) -> Prediction:
    """``measure`` at ``at`` workers from ``samples`` (worker count -> each run's value)."""
    samples = {w: [v for v in vs if math.isfinite(v)] for w, vs in samples.items()}
    samples = {w: vs for w, vs in sorted(samples.items()) if vs}
    runs = {w: len(vs) for w, vs in samples.items()}
    out = Prediction(measure.name, measure.text, measure.unit, measure.statistic, at, sorted(samples), runs)
    if len(samples) < pmnf.MIN_SCALES:
        out.refused = (
            f"{len(samples)} worker count(s) with runs: a model is chosen by leave-one-out cross-validation "
            f"over at least {pmnf.MIN_SCALES}"
        )
        return out
    p, y = _centres(measure, samples)
    ranked = pmnf.select(p, y, at, measure.bounds, pmnf.hypotheses(measure.laws))
    if not ranked:
        out.refused = f"no model stays inside the measure's bounds from {int(p.min())} to {at} workers"
        return out
    best = ranked[0]
    out.value = float(best.model(at))
    out.model, out.model_kind, out.cv_error = best.model.formula(), best.model.name(), best.cv_error
    out.runners_up = [(s.model.formula(), s.cv_error) for s in ranked[1:4]]
    got = _draws(measure, samples, at, [s.model.hypothesis for s in ranked[:SHORTLIST]], draws, seed)
    got = got[np.isfinite(got)]
    if got.size >= draws // 2:
        out.low, out.high = float(np.percentile(got, 2.5)), float(np.percentile(got, 97.5))
    out.reasons = _reasons(p, at, runs)
    out.quote = p.size >= QUOTE_SCALES and not _beyond(p, at)
    return out
