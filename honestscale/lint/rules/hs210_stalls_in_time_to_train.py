from __future__ import annotations

from collections.abc import Iterator

from honestscale.lint._engine import Finding, Rule, Said
from honestscale.view import Comparison, Run, View

DOMINATED = 0.5  # outlier steps' excess time above this share of the time to train dominates it
MIN_STEPS = 8  # fewer synchronous steps give no distribution to find outliers in


def stall_evidence(run: Run) -> dict[str, float | int | None]:
    """The numbers behind a run's stalls: outlier steps (Tukey), their excess time and its share."""
    s = run.steps
    assert s is not None
    return {
        "steps": s.sync_steps,
        "outliers": s.outliers,
        "median_step_s": s.sync_median_s,
        "fence_s": s.fence_s,
        "slowest_step_s": s.slowest_step_s,
        "outlier_excess_s": s.outlier_excess_s,
        "time_to_train_s": run.time_to_train_s,
        "share_of_time_to_train": run.stall_share,
        "beyond_median_pace_share": run.slow_share,
    }


def stalls_dominate(dominated: list[Run], successful: int) -> Said:
    shares = [r.lost_share or 0.0 for r in dominated]
    outliers = [r.steps.outliers or 0 for r in dominated if r.steps is not None]
    return (
        f"{len(dominated)} of {successful} run(s) spent {100 * min(shares):.0f}-{100 * max(shares):.0f} % of "
        f"their time to train in stalled steps ({min(outliers)}-{max(outliers)} steps above Tukey's fence "
        f"Q3 + 1.5 IQR; the rest beyond the median step's pace): their time to train measures the stalls, "
        f"not the training",
        "rerun them on an exclusive, quiet node (HS208) and find what stalled the steps (honestscale show "
        "RUN); compare steady-state step throughput, not these times",
    )


def too_few_steps(untimed: int) -> Said:
    return (
        f"{untimed} run(s) record fewer than {MIN_STEPS} step times",
        "record a step event per training step (honestscale's runners do), so stalls can be counted",
    )


class StallsInTimeToTrain(Rule):
    """A run's time to train must not be made of stalls: outlier steps are counted and their share reported.

    What it checks: per successful run, its synchronous steps (the slowest rank per step, warm-up excluded)
    above Tukey's upper fence (Q3 + 1.5 IQR of the run's own steps) are outliers; their time beyond the median
    step, as a share of the run's time to train, is the stall share. When stalls are more than a quarter of
    the steps the fence moves up past them, so the time of all steps beyond the median step's pace (steps x
    median) counts too. A run whose time to train is dominated by either (50 % or more) fails; the evidence gives every run's outlier count, the fence, the slowest
    step and the share. A run without step times (or with fewer than 8) cannot be verified.
    Why it misleads: a busy host, a page-cache miss, a checkpoint or a straggling rank makes a few steps many
    times slower than the rest; the median step hardly moves, but the time to train and every speedup built on
    it do. A base case full of stalls makes the scaled runs look superlinear (Hoefler & Belli, SC15, rule 5:
    report the spread, and look at outliers before summarising). Stalls alone stay a warning here (the run's
    own numbers say what they cost); when they make a speedup superlinear, HS209 names them as its cause and
    fails as an error, and that speedup is marked "do not quote".
    Example: on a shared 2-core machine, 1-worker runs of a 1.3 ms step spent 68 steps over 20 ms each: 70 % of
    their time to train was stalls, and the 2-worker runs looked 2.9x faster while each of their steps was
    4x slower.
    Fix: rerun the affected runs on an exclusive, quiet node (HS208); find the cause of the slow steps (I/O,
    other processes, checkpoints, garbage collection) with `honestscale show RUN`; report the steady-state
    step throughput beside the time to train.
    Reference: Hoefler & Belli, SC15, rules 5 and 9; J. W. Tukey, Exploratory Data Analysis (1977).
    """

    code = "HS210"
    name = "stalls-in-time-to-train"
    severity = "warning"
    summary = "no run's time to train is dominated by stalled (outlier) steps"

    def check(self, target: Comparison, view: View) -> Iterator[Finding]:
        ok = [r for r in target.runs if r.ok and r.time_to_train_s]
        timed = [r for r in ok if r.steps is not None and (r.steps.sync_steps or 0) >= MIN_STEPS]
        dominated = [r for r in timed if (r.lost_share or 0.0) >= DOMINATED]
        if dominated:
            yield self.fail(
                target,
                dominated,
                *stalls_dominate(dominated, len(ok)),
                per_run={r.id: stall_evidence(r) for r in timed},
            )
        untimed = [r for r in ok if r not in timed]
        if untimed:
            yield self.cannot_verify(target, untimed, *too_few_steps(len(untimed)))
