"""Amdahl's and Gustafson's laws fitted to the quantity each describes, and what they project: once, for the
report's figure and the advisor's projection.

* A fixed problem (strong scaling, or every run trained to one target accuracy with a per-worker batch: ``strong``,
  and ``time_to_solution`` with weak batches) is Amdahl's: the speedup of the median time (to accuracy, else to
  train) over the base case.
* A problem that grows with the workers (``weak``) is Gustafson's: the *scaled* speedup, the throughput at N
  workers over the base case's (harmonic means of runs), never a ratio of times to train.
* Batches that follow neither get no law (a time to solution whose batch is tuned per scale changes its work with
  the batch as well as with the workers).

A law is fitted only where it can describe the data: no superlinear point (HS209), no slowdown, a parallel
fraction inside (0, 1) rather than at a bound, and the law within ``TOLERANCE`` of every measured efficiency.
Two worker counts give the fraction they imply, labelled *not fitted*: one speedup fixes it exactly, so it has no
standard error, no interval and no projection. Three or more are fitted, and projected up to eight times the
largest. The 95 % interval comes from a bootstrap over each point's repetitions
(none with fewer than 6 runs at a point, as for every interval, or where every draw gives one value).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypedDict

import numpy as np

from honestscale.analysis.scaling import rates, superlinear, time_metric, times
from honestscale.analysis.stats import (
    LAWS,
    MIN_INTERVAL_RUNS,
    centre_of_rates,
    fit_law,
    fit_law_rows,
    law_efficiency,
    resampled,
)
from honestscale.view import Comparison, Run

MIN_FIT_POINTS = 3  # worker counts a law is fitted from (two fix its fraction exactly)
NOT_FITTED = (
    "implied by two worker counts, not fitted: one speedup fixes the fraction exactly (no standard error, no "
    "projection); a fit needs three worker counts"
)
TOLERANCE = 0.10  # the law's efficiency may differ from a measured one by this much (absolute)
BOUND = 1e-3  # a parallel fraction this close to 0 or 1 sits at the bound of the fit
BOOTSTRAP = 2000


class Projection(TypedDict):
    """The law's efficiency at a larger worker count, with its interval's bounds (None without an interval)."""

    workers: int
    efficiency: float
    low: float | None
    high: float | None


@dataclass
class LawFit:
    law: str | None  # amdahl | gustafson; None: no law describes the series
    quantity: str  # what the speedups are: "speedup of the median time to accuracy", "scaled speedup ..."
    measured: list[tuple[int, float]]  # (workers, speedup over the base case), the base first
    parallel_fraction: float | None = None
    stderr: float | None = None
    interval: tuple[float, float] | None = None  # 95 % bootstrap interval of the parallel fraction
    projected: list[Projection] = field(default_factory=list)
    withheld: str | None = None  # why the law is not fitted or projects nothing
    formula: str = ""

    @property
    def points(self) -> int:
        return len(self.measured)

    @property
    def fitted(self) -> bool:
        """Fitted to the points (three worker counts or more); else the fraction two imply, tested by nothing."""
        return self.points >= MIN_FIT_POINTS

    def describe(self) -> str:
        """``p = 0.767 (standard error 0.012)``, or ``p = 0.806, implied by two worker counts (not fitted ...)``."""
        if self.parallel_fraction is None:
            return ""
        if not self.fitted:
            return f"p = {self.parallel_fraction:.3f}, {NOT_FITTED}"
        return f"p = {self.parallel_fraction:.3f}" + (
            f" (standard error {self.stderr:.3f})" if self.stderr is not None else ""
        )


def law_of(c: Comparison) -> tuple[str | None, str]:
    """The law that describes the series and the quantity it is fitted to."""
    mode = c.classification
    if mode is None or mode.batches == "irregular":
        if mode is not None and mode.name == "time_to_solution":
            return None, (
                "no law: time to solution with a batch chosen per scale (neither strong nor weak by batch): the work "
                "to the target changes with the batch as well as with the workers"
            )
        return None, "no law: the batches are neither strong nor weak scaling (HS111)"
    if mode.name == "weak":
        return "gustafson", "scaled speedup: throughput over the base case's (harmonic means of runs)"
    return "amdahl", f"speedup of the median {time_metric(c.by_workers())}"


def _samples(points: dict[int, list[Run]], law: str) -> dict[int, list[float]]:
    """Per worker count, what each run contributes: its time (Amdahl) or its throughput (Gustafson)."""
    metric = time_metric(points)
    out = {}
    for w, runs in points.items():
        got = rates(runs, lambda r: r.throughput) if law == "gustafson" else times(runs, metric)
        if got:
            out[w] = got
    return out


def _speedups(law: str, samples: dict[int, list[float]], ws: list[int]) -> list[float]:
    if law == "gustafson":
        hm = [centre_of_rates(samples[w]) or 0.0 for w in ws]
        return [h / hm[0] for h in hm]
    meds = [float(np.median(samples[w])) for w in ws]
    return [meds[0] / m for m in meds]


def _p(law: str, samples: dict[int, list[float]], ws: list[int]) -> tuple[float, float | None] | None:
    n = [w / ws[0] for w in ws]
    return fit_law(law, n, _speedups(law, samples, ws), min_points=2)


def fit(c: Comparison, kept: set[str] | None = None, bootstrap: int = BOOTSTRAP) -> LawFit:
    """The law of a scaling series fitted to its runs (``kept``: only these), or why none is."""
    law, quantity = law_of(c)
    if law is None:
        return LawFit(None, quantity, [], withheld=quantity)
    points = {w: [r for r in runs if kept is None or r.id in kept] for w, runs in c.by_workers().items()}
    samples = _samples(points, law)
    ws = sorted(samples)
    if len(ws) < 2:
        return LawFit(law, quantity, [], withheld="fewer than two worker counts with successful runs")
    base = ws[0]
    speedups = _speedups(law, samples, ws)
    measured = [(w, s) for w, s in zip(ws, speedups, strict=True)]
    out = LawFit(law, quantity, measured, formula=LAWS[law])
    if c.hardware_note:  # a law of scale projects nothing from points that changed hardware too
        out.withheld = f"the {c.hardware_note}, which no law of scale describes"
        return out
    hot = superlinear(c.mode, {w: points[w] for w in ws})
    if any(s.above for s in hot):
        out.withheld = ("the measured efficiency is above the ideal beyond its interval (superlinear, HS209), "
                        "which no law describes; HS209 names the likely causes")  # fmt: skip
        return out
    unsure = [s for s in hot if s.unsure]
    if (
        unsure
    ):  # neither law reaches an efficiency above the ideal: a fit would contradict the point it is fitted to
        at = ", ".join(f"{s.point.workers}" for s in unsure)
        out.withheld = (f"the measured efficiency at {at} workers is above the ideal, with too few runs for an "
                        f"interval to tell it from noise (superlinear?, HS209 cannot verify it), which no law "
                        f"describes")  # fmt: skip
        return out
    slow = [(w, s) for w, s in measured[1:] if s < 1.0]
    if slow:
        w, s = slow[0]
        out.withheld = (f"{s:.2f}x at {w} workers: slower than the base case, a slowdown neither law describes "
                        "(the parallel fraction would be below 0)")  # fmt: skip
        return out
    got = _p(law, samples, ws)
    if got is None:
        out.withheld = "the fit did not converge"
        return out
    p, err = got
    out.parallel_fraction, out.stderr = p, (err if out.fitted else None)
    if p <= BOUND or p >= 1 - BOUND:
        out.withheld = (f"the fit sits at its bound (p = {p:.3f}): the data show "
                        + ("no parallel part" if p <= BOUND else "no serial part") + " the law could project from")  # fmt: skip
        return out
    if (
        not out.fitted
    ):  # the fraction two points imply: the law passes through both; nothing to test or project
        return out
    worst = max(measured[1:], key=lambda m: abs(law_efficiency(law, p, m[0] / base) - m[1] * base / m[0]))
    gap = law_efficiency(law, p, worst[0] / base) - worst[1] * base / worst[0]
    if abs(gap) > TOLERANCE:
        out.withheld = (f"the law does not describe the measured points: at {worst[0]} workers it gives "
                        f"{100 * law_efficiency(law, p, worst[0] / base):.0f} % efficiency where "
                        f"{100 * worst[1] * base / worst[0]:.0f} % was measured")  # fmt: skip
        return out
    _project(out, samples, ws, bootstrap)
    return out


def _project(out: LawFit, samples: dict[int, list[float]], ws: list[int], bootstrap: int) -> None:
    """The fitted law's 95 % bootstrap interval of its fraction (``bootstrap`` resamples of each point's
    repetitions, the law refitted in each) and its projection to 2, 4 and 8 times the largest worker count."""
    assert out.law is not None and out.parallel_fraction is not None
    law, p, base = out.law, out.parallel_fraction, ws[0]
    if all(len(v) >= MIN_INTERVAL_RUNS for v in samples.values()):  # no bootstrap of fewer (analysis.stats)
        rng = np.random.default_rng(0)
        statistic = "hmean" if law == "gustafson" else "median"
        centres = np.column_stack([resampled(samples[w], statistic, bootstrap, rng) for w in ws])
        drawn = centres / centres[:, :1] if law == "gustafson" else centres[:, :1] / centres
        got_p = fit_law_rows(law, [w / base for w in ws], drawn)
        got_p = got_p[np.isfinite(got_p)]
        if got_p.size:
            low, high = float(np.percentile(got_p, 2.5)), float(np.percentile(got_p, 97.5))
            out.interval = (low, high) if high - low > 1e-9 else None
    for w in (ws[-1] * 2, ws[-1] * 4, ws[-1] * 8):
        row: Projection = {
            "workers": w,
            "efficiency": law_efficiency(law, p, w / base),
            "low": None,
            "high": None,
        }
        if out.interval is not None:
            effs = [law_efficiency(law, q, w / base) for q in out.interval]
            row["low"], row["high"] = min(effs), max(effs)
        out.projected.append(row)
