"""Where a run's steps reach their steady state, found in the step times rather than assumed.

* **Warm-up end**: MSER-5 (White 1997; Franklin & White 2008, "Stationarity tests and MSER-5"): the step times in
  batch means of 5; the truncation d (in batches) that minimises the marginal standard error of what remains,
  ``sum((x_j - mean)^2) / (k - d)^2``, over d up to half the batches. A minimum at that bound means the series is
  still settling: **no steady state**. So does a trend in what remains (Spearman's rho of the batch means against
  their order, two-sided p < 1 %, and a change of more than 5 % between the first and the last third of what
  remains: autocorrelated steps make the p-value alone too eager).
* **Steady step time**: the mean of what remains, with a 95 % interval from non-overlapping batch means (steps are
  autocorrelated: a stall spans several steps, so single steps are not independent samples); the batches are as
  long as makes 10 to 30 of them, and a t-interval over their means.

The runners mark warm-up steps themselves (a fixed count); :func:`of_steps` reports both, so a reader sees whether
the marked warm-up covers the warm-up the data show.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

METHOD = "MSER-5 truncation; 95 % t-interval over non-overlapping batch means"
BATCH = 5
MIN_STEPS = 50  # fewer steps cannot tell a warm-up from noise with batches of 5 (10 batches)
TREND_P = 0.01
DRIFT = (
    0.05  # a trend also moves the step time this much (relative) from the first to the last third of the rest
)


@dataclass(frozen=True)
class SteadyState:
    steps: int
    warmup_steps: (
        int | None
    )  # detected: the steps before the steady state; None where there is none (or too few)
    marked_warmup: int  # what the run itself marked
    mean_step_s: float | None = None
    low_s: float | None = None
    high_s: float | None = None
    batches: int | None = None
    verdict: str = ""
    method: str = METHOD
    iterations: int = 1  # the most steps one event covers (a log's interval: ``steps`` counts intervals then)
    later_warmup: int = 0  # steps marked warm-up after the first unmarked one (a later launch's), left out

    def as_json(self) -> dict[str, Any]:
        return {
            "steps": self.steps, "steps_per_event": self.iterations, "detected_warmup_steps": self.warmup_steps, "marked_warmup_steps": self.marked_warmup,
            "steady_step_s": self.mean_step_s, "low_s": self.low_s, "high_s": self.high_s, "batches": self.batches,
            "verdict": self.verdict, "method": self.method, "later_warmup_left_out": self.later_warmup,
        }  # fmt: skip


def mser5(times: Sequence[float]) -> tuple[int | None, str]:
    """The MSER-5 truncation point in steps, or None and why there is no steady state."""
    from scipy import stats  # imported when used: it costs every command half a second

    k = len(times) // BATCH
    if len(times) < MIN_STEPS:
        return None, f"too few steps ({len(times)}, {MIN_STEPS} at least) to find a steady state"
    if not np.all(
        np.isfinite(np.asarray(times, dtype=float))
    ):  # the readers quarantine these; a caller may not
        return None, "no steady state: a step time is not a finite number"
    means = np.asarray(times[: k * BATCH], dtype=float).reshape(k, BATCH).mean(axis=1)
    limit = k // 2
    errors = [float(np.sum((means[d:] - means[d:].mean()) ** 2)) / (k - d) ** 2 for d in range(limit + 1)]
    # the first d at the minimum: errors equal but for rounding (steady steps of exactly one length leave 4e-34
    # at one d, 0.0 at a later one) are a tie, not a later warm-up end; the allowance is relative, with a floor far
    # below any real noise (1e-24 x mean^2 / k: rounding leaves ~1e-32 x mean^2 / k)
    least = min(errors) * (1 + 1e-9) + 1e-24 * float(np.mean(means)) ** 2 / k
    d = next(i for i, e in enumerate(errors) if e <= least)  # least >= min(errors): one always is
    if d == limit:
        return None, "no steady state: the step times still settle past half the run (MSER-5 at its bound)"
    rest = means[d:]
    if len(rest) >= 10 and np.ptp(rest) > 0:
        rho, p = stats.spearmanr(np.arange(len(rest)), rest)
        third = max(len(rest) // 3, 1)  # the change between the first and the last third of what remains
        drift = abs(float(rest[-third:].mean() - rest[:third].mean())) / float(np.mean(rest))
        if p < TREND_P and drift > DRIFT:
            way = "rising" if rho > 0 else "falling"
            return None, (f"no steady state: the step times keep {way} after the warm-up (Spearman rho {rho:.2f}, "
                          f"{100 * drift:.0f} % over the rest)")  # fmt: skip
    if len(rest) < 10:
        return d * BATCH, "steady (fewer than 10 batches after the warm-up: no trend test)"
    return d * BATCH, "steady"


def batch_means_interval(times: Sequence[float]) -> tuple[float, float | None, float | None, int]:
    """Mean of ``times`` and the 95 % t-interval over non-overlapping batch means (10 to 30 batches)."""
    from scipy import stats  # imported when used: it costs every command half a second

    n = len(times)
    batches = min(30, max(10, n // 20)) if n >= 10 else 0
    mean = float(np.mean(times))
    if batches < 10 or n < batches:
        return mean, None, None, batches
    size = n // batches
    means = np.asarray(times[: batches * size], dtype=float).reshape(batches, size).mean(axis=1)
    mean = float(
        means.mean()
    )  # of the steps the batches hold (the remainder past the last batch is left out)
    half = float(stats.t.ppf(0.975, batches - 1) * means.std(ddof=1) / math.sqrt(batches))
    return mean, mean - half, mean + half, batches


def of_steps(times: Sequence[float], marked: int, iterations: int = 1, later_warmup: int = 0) -> SteadyState:
    """The steady state of one rank's step times in order, beside the warm-up steps the run marked; none where an
    event covers several steps (``iterations``: a log's line per log_interval holds no single step's time).
    ``later_warmup``: the steps marked warm-up later in the run (a resumed launch's start-up), left out of
    ``times`` by the caller and said beside it."""
    if iterations > 1:
        why = f"not found: the log gives one line per up to {iterations} steps, no single step's time"
        return SteadyState(
            len(times), None, marked, verdict=why, iterations=iterations, later_warmup=later_warmup
        )
    start, verdict = mser5(times)
    if start is None:
        return SteadyState(len(times), None, marked, verdict=verdict, later_warmup=later_warmup)
    mean, low, high, batches = batch_means_interval(times[start:])
    return SteadyState(
        len(times), start, marked, mean, low, high, batches, verdict, later_warmup=later_warmup
    )
