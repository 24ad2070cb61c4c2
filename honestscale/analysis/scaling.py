"""Speedups and efficiencies of a scaling series, with the intervals of ratios, for every output.

A series is a list of worker counts with their runs (the linter's view). For each count other than the
base (the smallest), this module gives:

* the speedup and efficiency on **time** (time to accuracy where every successful run of the series has
  one, otherwise time to train): median(T base) / median(T N), efficiency S · base / N;
* the speedup and efficiency on **throughput** (samples/s over the timed steps, harmonic mean of runs);
* the speedup on **steady-state** step throughput (samples per step over the median step), which stalls
  do not move, and the **end-to-end** rate (samples trained over time to train);

each with the 95 % interval of the ratio (bootstrap over the repetitions of both points).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from honestscale import catalogue
from honestscale.analysis.stats import Estimate, ratio
from honestscale.view import Run

TTA = "time to accuracy"
TTT = "time to train"


def time_to_accuracy(run: Run) -> float | None:
    """From run start to the first validation evaluation at which every target of the run is reached."""
    t = reached_at(run)
    return None if t is None or run.started_at is None else float(t - run.started_at)


def targets_of(run: Run) -> tuple[catalogue.Metric, ...]:
    """The targets a run trains to, each with its direction: its MLPerf benchmark's metrics, else its own
    ``target_metric`` at ``stop_value``; none unless its stop criterion is a target accuracy."""
    if run.stop_criterion != "target_accuracy":
        return ()
    return catalogue.targets(run.target_metric, run.stop_value, run.mlperf)


def reached_at(run: Run) -> float | None:
    """The time of the first validation evaluation at which every target of the run is reached, all at once.

    The targets and their directions come from the benchmark catalogue: an MLPerf run must reach each of
    its benchmark's metrics (Mask R-CNN: bbox and segm mAP), lower-is-better ones (a word error rate) at or
    below their target; another run its own ``target_metric`` at ``stop_value``.
    """
    goals = targets_of(run)
    if not goals or run.started_at is None:
        return None
    evals = [e for e in run.evals if e.split == "validation"]
    if len(goals) == 1 and not any(e.metric == goals[0].name for e in evals):
        # a runner that names its metric otherwise (accuracy vs top1_accuracy): its evaluations are the target's
        evals = [e for e in evals if catalogue.direction(e.metric) == goals[0].better]
        goals = (replace(goals[0], name=evals[0].metric),) if evals else goals
    for t in sorted({e.time for e in evals}):
        # every target met at one evaluation (Mask R-CNN's bbox and segm, Stable Diffusion's FID and CLIP of one
        # checkpoint, which the collector places at the time the checkpoint was trained)
        at = {e.metric: e.value for e in evals if e.time == t}
        if all(g.name in at and g.reached(at[g.name]) for g in goals):
            return float(t)
    return None


def time_metric(points: Mapping[Any, Sequence[Run]]) -> str:
    """Time to accuracy when every successful run of the series reached its target, else time to train."""
    ok = [r for runs in points.values() for r in runs if r.ok]
    return TTA if ok and all(time_to_accuracy(r) is not None for r in ok) else TTT


def times(runs: Sequence[Run], metric: str) -> list[float]:
    got = (time_to_accuracy(r) if metric == TTA else r.time_to_train_s for r in runs if r.ok)
    return [float(t) for t in got if t]


def rates(runs: Sequence[Run], rate: Callable[[Run], float | None]) -> list[float]:
    return [float(v) for v in (rate(r) for r in runs if r.ok) if v]


@dataclass(frozen=True)
class Scaled:
    """One worker count against the base case."""

    workers: int
    base_workers: int
    time_metric: str
    time_speedup: Estimate | None
    throughput_speedup: Estimate | None
    steady_speedup: Estimate | None
    end_to_end_speedup: Estimate | None

    @property
    def ideal(self) -> float:
        return self.workers / self.base_workers

    def efficiency(self, speedup: Estimate | None) -> Estimate | None:
        return None if speedup is None else speedup.scaled(1 / self.ideal)

    @property
    def time_efficiency(self) -> Estimate | None:
        return self.efficiency(self.time_speedup)

    @property
    def throughput_efficiency(self) -> Estimate | None:
        return self.efficiency(self.throughput_speedup)


def scaled(points: dict[int, list[Run]]) -> list[Scaled]:
    """Every worker count after the base, against the base (``points``: workers -> runs, any order)."""
    if len(points) < 2:
        return []
    ws = sorted(points)
    base = points[ws[0]]
    metric = time_metric(points)
    out = []
    for w in ws[1:]:
        runs = points[w]

        def up(rate: Callable[[Run], float | None], runs: list[Run] = runs) -> Estimate | None:
            return ratio(rates(runs, rate), rates(base, rate), "hmean")

        out.append(
            Scaled(
                workers=w, base_workers=ws[0], time_metric=metric,
                time_speedup=ratio(times(base, metric), times(runs, metric), "median"),
                throughput_speedup=up(lambda r: r.throughput), steady_speedup=up(lambda r: r.steady_rate),
                end_to_end_speedup=up(lambda r: r.end_to_end_rate),
            )
        )  # fmt: skip
    return out


def efficiencies(mode: str | None, p: Scaled) -> dict[str, Estimate]:
    """The efficiencies a series is judged on at one worker count: on time where the problem is fixed (strong
    scaling, or every run to one target), and on throughput per worker in every mode."""
    out: dict[str, Estimate] = {}
    if mode != "weak" and p.time_efficiency is not None:
        out[f"{p.time_metric} efficiency"] = p.time_efficiency
    if p.throughput_efficiency is not None:
        out["throughput efficiency"] = p.throughput_efficiency
    return out


@dataclass(frozen=True)
class Superlinear:
    """One worker count whose efficiency is above 1: beyond its 95 % interval (``above``), or with no interval."""

    point: Scaled
    efficiencies: dict[str, Estimate]  # every efficiency the point is judged on (``efficiencies``)
    above: dict[str, Estimate]  # above 1 beyond the interval of the ratio
    unsure: dict[str, Estimate]  # above 1, no interval (fewer than 6 runs on a side)


def superlinear(mode: str | None, points: dict[int, list[Run]]) -> list[Superlinear]:
    """Every worker count of a series whose efficiency is above the ideal: the one reading of HS209, the report and
    the advisor."""
    out = []
    for p in scaled(points):
        effs = efficiencies(mode, p)
        above = {k: e for k, e in effs.items() if e.above(1.0)}
        unsure = {k: e for k, e in effs.items() if not e.has_interval and e.value > 1.0}
        if above or unsure:
            out.append(Superlinear(p, effs, above, {} if above else unsure))
    return out
