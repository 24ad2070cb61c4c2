from __future__ import annotations

from collections.abc import Iterator

from honestscale.lint._engine import Finding, Rule, Said
from honestscale.view import Comparison, View

NO_CONFIG_HASH: Said = ("the runs have no config hash", "record config_hash in run_start")


def mixed_configurations(count: int) -> Said:
    return (
        f"one reported point mixes {count} configurations (config hashes)",
        "report each configuration on its own; take speed and accuracy from the same runs",
    )


class PerformanceAndAccuracyFromDifferentOptions(Rule):
    """The speed and the accuracy of one reported point must come from the same configuration.

    What it checks: all runs of a configuration point share one config hash (the hash over everything
    that defines the experiment); in particular, runs that carry the timing and runs that carry the
    accuracy are not different configurations.
    Why it misleads: fp16 and no regularisation for the speed, fp32 and the full recipe for the accuracy:
    the reported point was never one run (Hoefler 2018, "report performance with options A and
    accuracy with options B").
    Example: throughput measured with synthetic data and batch 4096, accuracy taken from a batch-256 run.
    Fix: report speed and accuracy from the same runs; keep different configurations as different points.
    Reference: Hoefler 2018, rule 8.
    """

    code = "HS108"
    name = "performance-and-accuracy-from-different-options"
    severity = "error"
    summary = "speed and accuracy of a point come from one configuration (config hash)"

    def check(self, target: Comparison, view: View) -> Iterator[Finding]:
        hashes = {r.config_hash or None for r in target.runs}  # an empty hash identifies nothing
        if None in hashes:
            yield self.cannot_verify(
                target,
                [r for r in target.runs if not r.config_hash],
                *NO_CONFIG_HASH,
            )
            return
        if len(hashes) > 1:
            timed = sorted(
                {r.config_hash or "" for r in target.runs if r.steps is not None and r.steps.steps}
            )
            scored = sorted({r.config_hash or "" for r in target.runs if r.final_value is not None})
            yield self.fail(
                target,
                target.runs,
                *mixed_configurations(len(hashes)),
                config_hashes=sorted(str(h) for h in hashes),
                timed_by=timed,
                accuracy_from=scored,
            )
