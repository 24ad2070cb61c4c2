from __future__ import annotations

from collections.abc import Iterator

from honestscale.lint._engine import Finding, Rule, Said
from honestscale.view import Comparison, View


def no_base_case(base_workers: int) -> Said:
    return (
        f"the base case ({base_workers} workers) has no successful run with a time: speedups have no base",
        "run the base case to completion with the same code and settings",
    )


class SpeedupWithoutBaseCase(Rule):
    """A speedup needs its base case, stated with its absolute time.

    What it checks: the smallest worker count of a scaling series (the base of every speedup and
    efficiency) has at least one successful run with a time to train; the base and its absolute time are
    given as evidence (the report prints them).
    Why it misleads: speedups over an unstated, or a deliberately slow, base case look arbitrarily good;
    without the base's absolute time a reader cannot tell a 10x speedup of a 10-hour run from one of a
    10-second run (Hoefler & Belli, SC15, rule 1).
    Example: "64x speedup on 128 GPUs" where the 1-GPU base ran an unoptimised code path.
    Fix: run the base case with the same code and settings, keep its successful runs, and report its
    absolute time beside every speedup.
    Reference: T. Hoefler and R. Belli, "Scientific benchmarking of parallel computing systems", SC15,
    rule 1.
    """

    code = "HS201"
    name = "speedup-without-base-case"
    severity = "error"
    summary = "the base case of a speedup has successful runs and an absolute time"
    reach = "ratios"  # about the series: its speedups, efficiencies and predictions

    def targets(self, view: View) -> list[Comparison]:
        return view.of_kind("scaling")

    def check(self, target: Comparison, view: View) -> Iterator[Finding]:
        points = target.by_workers()
        base_workers = min(points)
        base = [r for r in points[base_workers] if r.ok and r.time_to_train_s is not None]
        if not base:
            yield self.fail(
                target,
                points[base_workers],
                *no_base_case(base_workers),
                base_workers=base_workers,
            )
