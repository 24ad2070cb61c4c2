"""The numbers of one pair: time to accuracy (or to train), throughput, energy and the MLPerf score, each side's
centre with its 95 % interval, B over A with the interval of the ratio, and the two-sided Mann-Whitney test.

Every statistic is the one of ``honestscale.analysis.stats`` (medians of times, harmonic means of rates, bootstrap
intervals of ratios, Mann-Whitney U): nothing is computed here that the report computes otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from honestscale.analysis.mlperf import submissions
from honestscale.analysis.points import sig
from honestscale.analysis.scaling import TTA, TTT, rates, time_to_accuracy, times
from honestscale.analysis.stats import (
    DECISION_RULE,
    MIN_INTERVAL_RUNS,
    RATE_STATISTIC,
    TIME_STATISTIC,
    Difference,
    Estimate,
    centre_of_rates,
    centre_of_times,
    differ,
    hmean_ci,
    median_ci,
    mlperf_score,
    ratio,
)
from honestscale.view import Run

TIME, THROUGHPUT, ENERGY, SCORE = "time", "throughput", "energy", "mlperf score"
MEASURES = (TIME, THROUGHPUT, ENERGY)


@dataclass(frozen=True)
class Side:
    values: tuple[float, ...]
    centre: float | None
    ci: tuple[float | None, float | None]
    runs: int  # every run of the side, failed included
    ok: int  # the runs the values come from

    def as_json(self) -> dict[str, object]:
        return {"values": list(self.values), "centre": self.centre, "ci": list(self.ci), "runs": self.runs,
                "runs_ok": self.ok}  # fmt: skip


@dataclass(frozen=True)
class Measure:
    """One measure of a pair: A and B, B over A, and whether they differ."""

    kind: str  # time | throughput | energy | mlperf score
    name: str  # "time to accuracy", "throughput", ...
    unit: str
    better: str  # lower | higher
    statistic: str  # median of runs | harmonic mean of runs | olympic mean (MLPerf)
    a: Side
    b: Side
    ratio: Estimate | None  # B's statistic over A's
    difference: Difference | None  # None for the MLPerf score (one number a side)

    @property
    def slowdown(self) -> Estimate | None:
        """How much slower B is than A (> 1: slower), with its interval: B/A for times, A/B for rates."""
        r = self.ratio
        if r is None or self.better == "lower":
            return r
        return r.inverse()

    def sentence(self) -> str:
        """'B 2.41x slower than A in time to accuracy at the median of runs (B/A 2.41, 95 % interval 2.20-2.63);
        significant difference (n = 6 and 6: Mann-Whitney p = 0.002 < 0.05; ...)': the verdict follows from the
        numbers in the sentence by the one decision rule (``analysis.stats.DECISION_RULE``)."""
        s, r = self.slowdown, self.ratio
        if s is None or r is None:
            missing = "A" if self.a.centre is None else "B"
            return f"{self.name}: none on side {missing}"
        how = f"{sig(s.value, 3)}x slower" if s.value >= 1 else f"{sig(1 / s.value, 3)}x faster"
        ci = (
            f", 95 % interval {sig(r.low, 3)}-{sig(r.high, 3)}"
            if r.has_interval
            else f", no interval: fewer than {MIN_INTERVAL_RUNS} runs a side"
            if self.difference is not None
            else ", no interval: one score a side"
        )
        test = self.difference.describe() if self.difference else "one score a side: no test"
        return f"B {how} than A in {self.name} at the {self.statistic} (B/A {sig(r.value, 3)}{ci}); {test}"

    def as_json(self) -> dict[str, object]:
        d, r = self.difference, self.ratio
        return {
            "measure": self.kind, "name": self.name, "unit": self.unit, "better": self.better,
            "statistic": self.statistic, "a": self.a.as_json(), "b": self.b.as_json(),
            "ratio": None if r is None else {"value": r.value, "low": r.low, "high": r.high, "of": "B / A"},
            "p_value": None if d is None else d.p_value, "test": "two-sided Mann-Whitney U" if d else None,
            "verdict": None if d is None else d.verdict, "decision_rule": DECISION_RULE,
            "evidence": None if d is None else [{"says": t, "differ": x} for t, x in d.evidence()],
            "significant": None if d is None else d.significant, "testable": None if d is None else d.testable,
            "sentence": self.sentence(),
        }  # fmt: skip


def _side(values: list[float], time_like: bool, runs: Sequence[Run]) -> Side:
    """Times: the median and its order-statistic interval; rates: the harmonic mean and its bootstrap interval."""
    if time_like:
        return Side(
            tuple(values), centre_of_times(values), median_ci(values), len(runs), sum(r.ok for r in runs)
        )
    return Side(tuple(values), centre_of_rates(values), hmean_ci(values), len(runs), sum(r.ok for r in runs))


def _measure(kind: str, name: str, unit: str, better: str, a: Sequence[Run], b: Sequence[Run],
             value: Callable[[Sequence[Run]], list[float]]) -> Measure:  # fmt: skip
    va, vb = value(a), value(b)
    time_like = better == "lower"
    statistic = "median" if time_like else "hmean"
    r = ratio(vb, va, statistic)
    return Measure(kind, name, unit, better, TIME_STATISTIC if time_like else RATE_STATISTIC,
                   _side(va, time_like, a), _side(vb, time_like, b),
                   r, differ(vb, va, statistic, r) if va and vb else None)  # fmt: skip


def time_measure(runs: Sequence[Run]) -> str:
    """Time to accuracy when every successful run of both sides reached its target, else time to train."""
    ok = [r for r in runs if r.ok]
    return TTA if ok and all(time_to_accuracy(r) is not None for r in ok) else TTT


def _score(runs: Sequence[Run]) -> tuple[float | None, str]:
    if all(r.source == "mlperf" for r in runs):
        subs = submissions(runs)
        return (subs[0].scaled_s, subs[0].note) if subs else (None, "no submission")
    ts = [float(r.time_to_train_s) if r.ok and r.time_to_train_s else None for r in runs]
    return mlperf_score(ts, 1), "olympic mean of the runs' times to train, 1 dropped at each end"


def time_of(a: Sequence[Run], b: Sequence[Run], metric: str) -> Measure:
    """The pair's time on ``metric`` (``TTT`` or ``TTA``), where a claim names the one ``measures`` did not choose."""
    return _measure(TIME, metric, "s", "lower", a, b, lambda rs: times(rs, metric))


def measures(a: Sequence[Run], b: Sequence[Run], state_of_the_art: bool) -> list[Measure]:
    """Time, throughput and energy of a pair (those that either side has), and against MLPerf the score."""
    metric = time_measure([*a, *b])
    out = [_measure(TIME, metric, "s", "lower", a, b, lambda rs: times(rs, metric))]
    out.append(
        _measure(
            THROUGHPUT,
            "throughput",
            "samples/s",
            "higher",
            a,
            b,
            lambda rs: rates(rs, lambda r: r.throughput),
        )
    )
    out.append(_measure(ENERGY, "energy to train", "J", "lower", a, b,
                        lambda rs: [float(r.energy_to_train_j) for r in rs if r.ok and r.energy_to_train_j]))  # fmt: skip
    out = [m for m in out if m.kind == TIME or m.a.values or m.b.values]
    if state_of_the_art:
        (sa, na), (sb, nb) = _score(a), _score(b)
        out.append(Measure(SCORE, "MLPerf score", "s", "lower", f"olympic mean (A: {na}; B: {nb})",
                           Side(() if sa is None else (sa,), sa, (None, None), len(a), sum(r.ok for r in a)),
                           Side(() if sb is None else (sb,), sb, (None, None), len(b), sum(r.ok for r in b)),
                           Estimate(sb / sa) if sa and sb else None, None))  # fmt: skip
    return out


__all__ = [
    "ENERGY",
    "MEASURES",
    "SCORE",
    "THROUGHPUT",
    "TIME",
    "TTT",
    "Measure",
    "Side",
    "measures",
    "time_of",
]
