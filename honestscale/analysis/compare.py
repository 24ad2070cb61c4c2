"""Comparisons that hold up (SC15 rule 7): an ordering is stated only where a test supports it.

Two configurations (worker counts of a series, frameworks at one scale) are called different only by the one
decision rule of ``analysis.stats`` (``DECISION_RULE``) over the evidence printed beside them: the two-sided
Mann-Whitney U test at 5 %, the 95 % interval of the ratio printed (the speedup over the base case; the relative
time of a framework) and the medians' intervals; where these disagree the output says "the tests disagree". Worker
counts are compared with the base case on the series' time metric (the speedup's two sides); frameworks with the
fastest one on time to train.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from honestscale.analysis.scaling import TTT, time_metric, times
from honestscale.analysis.stats import Difference, centre_of_times, differ, ratio
from honestscale.view import Run


@dataclass(frozen=True)
class Ordering:
    """``a`` against ``b`` on one measure (a time: lower is better)."""

    a: str  # "2 workers", "tensorflow"
    b: str  # "1 worker", "torch"
    measure: str  # time to accuracy | time to train
    a_median: float | None
    b_median: float | None
    difference: Difference
    runs: tuple[Run, ...] = ()  # of both sides

    @property
    def ratio(self) -> float | None:
        """a's median over b's: > 1 means a is slower."""
        return self.a_median / self.b_median if self.a_median and self.b_median else None

    @property
    def testable(self) -> bool:
        return self.difference.testable

    def as_json(self) -> dict[str, Any]:
        d = self.difference
        return {"a": self.a, "b": self.b, "measure": self.measure, "a_median": self.a_median,
                "b_median": self.b_median, "ratio": self.ratio, "p_value": d.p_value, "n_a": d.n_a, "n_b": d.n_b,
                "intervals_overlap": d.intervals_overlap, "significant": d.significant, "testable": self.testable,
                "verdict": d.verdict, "disagree": d.disagree,
                "sentence": self.sentence(), "runs": sorted(r.id for r in self.runs)}  # fmt: skip

    def sentence(self) -> str:
        """'2 workers: 3.21x slower than 1 worker in time to train (significant difference (p = 0.002, ...))'."""
        r = self.ratio
        if r is None:
            return f"{self.a} vs {self.b}: no {self.measure} on one side"
        if not self.difference.significant:
            return f"{self.a} vs {self.b} in {self.measure} ({r:.2f}x the time): {self.difference.describe()}"
        how = f"{r:.2f}x slower" if r >= 1 else f"{1 / r:.2f}x faster"
        return f"{self.a}: {how} than {self.b} in {self.measure}, {self.difference.describe()}"


def _workers(n: int) -> str:
    return f"{n} worker" + ("" if n == 1 else "s")


def scaling(points: dict[int, list[Run]]) -> list[Ordering]:
    """Every worker count after the base against the base, on the series' time metric."""
    if len(points) < 2:
        return []
    ws = sorted(points)
    metric = time_metric(points)
    base = times(points[ws[0]], metric)
    out = []
    for w in ws[1:]:
        here = times(points[w], metric)
        speedup = ratio(base, here, "median")  # the speedup the report prints beside it (analysis.scaling)
        out.append(Ordering(_workers(w), _workers(ws[0]), metric, centre_of_times(here), centre_of_times(base),
                            differ(here, base, "median", speedup), (*points[w], *points[ws[0]])))  # fmt: skip
    return out


def framework_groups(runs: Sequence[Run]) -> dict[str, list[Run]]:
    """The runs of a framework comparison (the view's like-for-like setup) by framework; empty when fewer than two
    frameworks ran it."""
    groups: dict[str, list[Run]] = defaultdict(list)
    for r in runs:
        groups[r.framework or "?"].append(r)
    return dict(groups) if len(groups) >= 2 else {}


def layout_groups(runs: Sequence[Run]) -> dict[str, list[Run]]:
    """The runs of a layout comparison (one model at one worker count) by ``Run.layout_name``; empty when fewer
    than two layouts ran."""
    groups: dict[str, list[Run]] = defaultdict(list)
    for r in sorted(runs, key=lambda r: r.id):
        groups[r.layout_name].append(r)
    return dict(groups) if len(groups) >= 2 else {}


def layouts(groups: Mapping[str, Sequence[Run]]) -> list[Ordering]:
    """Every layout against the fastest, on time to the target where every successful run reached it (else time to
    train), as the report's layout section and HS212 both state it."""
    return _against_fastest(groups, time_metric(groups)) if groups else []


def frameworks(groups: Mapping[str, Sequence[Run]]) -> list[Ordering]:
    """Every framework against the fastest (median time to train), at one scale."""
    return _against_fastest(groups, TTT)


def _against_fastest(groups: Mapping[str, Sequence[Run]], metric: str) -> list[Ordering]:
    medians = {name: centre_of_times(times(runs, metric)) for name, runs in groups.items()}
    ranked = sorted((m, n) for n, m in medians.items() if m is not None)
    if len(ranked) < 2:
        return []
    fastest = ranked[0][1]
    ref = times(groups[fastest], metric)
    out = []
    for _, name in ranked[1:]:
        mine = times(groups[name], metric)
        out.append(Ordering(name, fastest, metric, medians[name], medians[fastest],
                            differ(mine, ref, "median", ratio(mine, ref, "median")),
                            (*groups[name], *groups[fastest])))  # fmt: skip
    return out
