from __future__ import annotations

from collections.abc import Iterator

from honestscale.lint._engine import Finding, Rule, Said
from honestscale.view import Comparison, View

MIN_RUNS = 6  # the smallest n whose (min, max) covers the median with >= 95 % (1 - 2 * 0.5**n)


def too_few(successful: int, coverage: float) -> Said:
    return (
        f"{successful} successful run(s): a median's interval from {successful} runs covers "
        f"{100 * coverage:.1f} %, not 95 %",
        f"run at least {MIN_RUNS} repetitions of each configuration",
    )


class TooFewRepetitions(Rule):
    """Each configuration needs enough successful repetitions for a 95 % confidence interval of its median.

    What it checks: every configuration point has at least 6 successful runs, the fewest for which a
    nonparametric (order-statistic) interval covers the median with at least 95 % confidence
    (5 runs give 93.8 %, 3 runs 75 %).
    Why it misleads: one run, or three, cannot separate the effect from the noise of a shared cluster;
    a difference smaller than the run-to-run spread is reported as a result (Hoefler & Belli, SC15,
    rules 5 and 7).
    Example: framework A at 41.2 min vs framework B at 42.0 min, one run each.
    Fix: set repetitions = 6 (or more) in the campaign spec; the report prints medians with their
    nonparametric intervals.
    Reference: Hoefler & Belli, SC15, rule 5 (report variation) and 7 (enough measurements for a CI).
    """

    code = "HS202"
    name = "too-few-repetitions"
    severity = "warning"
    summary = "at least 6 successful repetitions per configuration (95 % CI of the median)"

    def check(self, target: Comparison, view: View) -> Iterator[Finding]:
        ok = [r for r in target.runs if r.ok]
        if len(ok) < MIN_RUNS:
            coverage = 1 - 2 * 0.5 ** len(ok) if ok else 0.0
            yield self.fail(
                target,
                target.runs,
                *too_few(len(ok), coverage),
                successful_runs=len(ok),
                needed=MIN_RUNS,
                coverage=round(coverage, 4),
            )
