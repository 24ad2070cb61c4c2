from __future__ import annotations

from collections.abc import Iterator
from statistics import median

from honestscale.analysis.scaling import scaled
from honestscale.analysis.stats import Estimate
from honestscale.lint._engine import Finding, Rule, Said
from honestscale.view import Comparison, Run, View

APART = 1.5  # two speedups further apart than this factor (and beyond their intervals) disagree
NOISE = 0.10  # without intervals, a speedup within 10 % of 1 points in no direction
STALLED = 0.25  # a median stall share above this explains a time to train that the steps do not
OUTSIDE = 0.20  # time outside the steps differing by this share of the time to train explains it too


def _direction(e: Estimate) -> int:
    """+1 faster, -1 slower, 0 undecided: beyond the interval, or beyond 10 % without one."""
    if e.has_interval:
        return 1 if e.above(1.0) else -1 if e.below(1.0) else 0
    return 1 if e.value > 1 + NOISE else -1 if e.value < 1 - NOISE else 0


def _outside(runs: list[Run]) -> float:
    """Median share of the time to train spent outside the timed steps (evaluations, start-up, waits)."""
    shares = [
        1 - min(1.0, r.steps.step_time_s / r.time_to_train_s)
        for r in runs
        if r.ok and r.steps is not None and r.steps.step_time_s and r.time_to_train_s
    ]
    return median(shares) if shares else 0.0


def _stalls(runs: list[Run]) -> float:
    shares = [r.lost_share for r in runs if r.ok and r.lost_share is not None]
    return median(shares) if shares else 0.0


def data_supports(workers: int, b_st: float, n_st: float, base: list[Run], runs: list[Run]) -> str:
    """Which speedup the data supports, and why: the steady state, neither alone, or the time to train."""
    if max(b_st, n_st) >= STALLED:
        where = "base" if b_st >= n_st else f"{workers}-worker"
        return (
            f"the steady state: the {where} runs spent a median {100 * max(b_st, n_st):.0f} % of "
            f"their time to train in stalled steps (HS210)"
        )
    if abs(_outside(base) - _outside(runs)) >= OUTSIDE:
        b_out, n_out = _outside(base), _outside(runs)
        where = "base" if b_out >= n_out else f"{workers}-worker"
        return (
            f"neither alone: the {where} runs spent {100 * max(b_out, n_out):.0f} % of their time to "
            f"train outside the timed steps (against {100 * min(b_out, n_out):.0f} %): evaluations, "
            f"start-up or waits between steps on a busy host (HS208); the steady state measures the "
            f"steps, the time to train what a user waits for; rerun on a quiet node before quoting "
            f"either"
        )
    return (
        "the time to train, as the end-to-end cost: few stalls, so the difference is work the "
        "steps do not contain (evaluations, start-up, waits between steps)"
    )


def _say(e: Estimate) -> str:
    return f"{e.value:.2f}x" + (f" (95 % CI {e.low:.2f}-{e.high:.2f})" if e.has_interval else "")


def speedups_disagree(workers: int, e2e: Estimate, steady: Estimate, opposite: bool, supported: str) -> Said:
    how = "point in different directions" if opposite else "differ beyond their intervals"
    return (
        f"at {workers} workers, time to train gives {_say(e2e)} and steady-state step throughput "
        f"{_say(steady)}: they {how}; the data supports {supported}",
        "report both speedups and say which one a claim uses; find what the time to train holds that the "
        "steps do not (honestscale show RUN) and rerun on a quiet node",
    )


class TimeToTrainContradictsThroughput(Rule):
    """The speedup from time to train and the speedup from step throughput must tell the same story.

    What it checks: per scaling series and worker count, the speedup of the end-to-end rate (samples trained
    over time to train: for strong scaling with the same samples, the speedup of time to train) and the
    speedup of steady-state step throughput (samples per step over the median step, warm-up excluded), each a
    ratio of harmonic means with its bootstrap 95 % interval. It fails when they point in different directions
    (one faster, one slower, each beyond its interval), or when both intervals exclude each other and the two
    differ by more than 1.5x; the finding says which one the data supports: the steady state when stalls
    (HS210) fill the time to train; neither alone when one side spent far more of its time to train outside
    its timed steps (20 points or more: evaluations, start-up, waits between steps on a busy host); otherwise
    the time to train (the run's end-to-end cost, evaluations and waits included).
    Why it misleads: a time to train can be inflated by what is not training (stalls on a busy host, slow
    evaluations, start-up); the step throughput can hide what the user waits for. When they disagree, a
    speedup quoted from one of them alone is an artefact of the measurement, not a property of the system
    (Hoefler & Belli, SC15, rule 9: understand the measurement before summarising it).
    Example: time to train says 2.90x at 2 workers, the steps say 0.23x: the 1-worker runs spent most of their
    time in stalled steps.
    Fix: find out what the time to train contains that the steps do not (honestscale show RUN: evaluations,
    stalls, gaps between steps); rerun on a quiet node; report both speedups and say which one the claim is.
    Reference: Hoefler & Belli, SC15, rules 5 and 9; Hoefler 2018 (time to solution beside throughput).
    """

    code = "HS211"
    name = "time-to-train-contradicts-throughput"
    severity = "warning"
    summary = "the speedups from time to train and from step throughput agree"
    reach = "ratios"  # about the series: its speedups, efficiencies and predictions

    def targets(self, view: View) -> list[Comparison]:
        return view.of_kind("scaling")

    def check(self, target: Comparison, view: View) -> Iterator[Finding]:
        points = target.by_workers()
        base = points[min(points)] if points else []
        for p in scaled(points):
            e2e, steady = p.end_to_end_speedup, p.steady_speedup
            if e2e is None or steady is None:
                continue
            opposite = _direction(e2e) * _direction(steady) < 0
            apart = (
                not e2e.overlaps(steady)
                and e2e.has_interval
                and steady.has_interval
                and max(e2e.value, steady.value) / min(e2e.value, steady.value) > APART
            )
            if not (opposite or apart):
                continue
            runs = base + points[p.workers]
            b_st, n_st = _stalls(base), _stalls(points[p.workers])
            supported = data_supports(p.workers, b_st, n_st, base, points[p.workers])
            yield self.fail(
                target,
                runs,
                *speedups_disagree(p.workers, e2e, steady, opposite, supported),
                workers=p.workers,
                base_workers=p.base_workers,
                end_to_end_speedup=vars(e2e),
                steady_speedup=vars(steady),
                base_stall_share=b_st,
                stall_share=n_st,
            )
