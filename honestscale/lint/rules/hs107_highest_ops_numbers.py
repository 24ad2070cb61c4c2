from __future__ import annotations

from collections.abc import Iterator

from honestscale.lint._engine import Finding, Rule
from honestscale.view import Comparison, Run, View

RATE_WORDS = ("flop", "ops", "tops")


class HighestOpsNumbers(Rule):
    """A rate (FLOP/s, ops/s, samples/s) must stand beside the time to solution.

    What it checks: when runs report an operation rate (an evaluation metric or run_start field
    naming FLOP/s or ops), or were stopped on a sample or time budget (throughput measurements), at least
    one run of the configuration trained to a solution: it reached its target accuracy or its planned
    epochs, with a time to train.
    Why it misleads: the highest FLOP/s often come from settings (huge batches, low precision, no I/O)
    that train slower to the same accuracy; rates without time to solution reward the wrong thing
    (Hoefler 2018, "report highest ops numbers").
    Example: "312 TFLOP/s sustained" for a configuration that never reached the target accuracy.
    Fix: report time to accuracy (or to the planned epochs) first and the rate as an explanation of it.
    Reference: Hoefler 2018, rule 7.
    """

    code = "HS107"
    name = "highest-ops-numbers"
    severity = "warning"
    summary = "operation rates are reported beside a time to solution"

    def targets(self, view: View) -> list[Comparison]:
        return [c for c in view.of_kind("config") if any(_reports_rate(r) for r in c.runs)]

    def check(self, target: Comparison, view: View) -> Iterator[Finding]:
        rate_runs = [r for r in target.runs if _reports_rate(r)]
        solved = [r for r in target.runs if r.ok and r.stop_criterion in ("target_accuracy", "epochs")
                  and r.time_to_train_s is not None]  # fmt: skip
        if not solved:
            yield self.fail(
                target,
                rate_runs,
                "rates or throughput budgets reported without any time to solution",
                "train the same configuration to the target accuracy (or planned epochs) and report its time",
                stop_criteria=sorted({str(r.stop_criterion) for r in rate_runs}),
            )


def _reports_rate(r: Run) -> bool:
    return (
        any(w in e.metric.lower() for e in r.evals for w in RATE_WORDS)
        or any(k != "peak_tflops" and ("flops" in k.lower() or "ops_per_s" in k.lower()) for k in r.attrs)
        or r.stop_criterion in ("samples", "wall_time")
    )
