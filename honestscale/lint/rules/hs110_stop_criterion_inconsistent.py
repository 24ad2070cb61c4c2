from __future__ import annotations

from collections.abc import Iterator

from honestscale.lint._engine import Finding, Rule, Said
from honestscale.view import Comparison, View

NOT_RECORDED: Said = (
    "the runs do not say what stopped them",
    "record stop_criterion and stop_value in run_start",
)
WALL_CLOCK: Said = (
    "runs stopped on a wall-clock budget",
    "stop every scale at the same target accuracy or epoch count",
)


NO_VALUE: Said = (
    "the runs record their stop criterion without its value, which other runs of the series record",
    "record stop_value in run_start beside stop_criterion",
)


def mixed_criteria(criteria: list[str]) -> Said:
    return (
        f"the series mixes stop criteria: {', '.join(criteria)}",
        "use one stop criterion and value for every scale",
    )


class StopCriterionInconsistent(Rule):
    """Scaling runs must stop on the same criterion, and not on a wall-clock budget.

    What it checks: every run of a scaling series records its stop criterion, none stops on
    ``wall_time``, and all use the same criterion and value (values compared to 12 significant digits,
    0.759 against 0.7590001 is two values); a run that records no value where other runs of its
    criterion record one cannot be verified, unless the runs that record theirs already mix (a wall-clock stop
    fails first).
    Why it misleads: training "for one hour" at every scale, or comparing runs stopped after N epochs
    with runs stopped at a target accuracy, picks the moment that flatters the result (Hoefler 2018,
    "train just for the right time").
    Example: 8 GPUs trained to 75.9 % top-1 against 64 GPUs trained for 30 minutes, both "converged".
    Fix: stop every scale at the same target accuracy (or the same number of epochs) and say which.
    Reference: Hoefler 2018, rule 10.
    """

    code = "HS110"
    name = "stop-criterion-inconsistent"
    old_names = ("train-for-the-right-time",)  # until 0.2: an imperative, not the bad practice
    severity = "error"
    summary = "scaling runs stop on one criterion, not on wall time"
    reach = "ratios"  # about the series: its speedups, efficiencies and predictions

    def targets(self, view: View) -> list[Comparison]:
        return view.of_kind("scaling")

    def check(self, target: Comparison, view: View) -> Iterator[Finding]:
        unknown = [r for r in target.runs if r.stop_criterion is None]
        if unknown:
            yield self.cannot_verify(
                target,
                unknown,
                *NOT_RECORDED,
            )
            return
        timed = [r for r in target.runs if r.stop_criterion == "wall_time"]
        if timed:
            yield self.fail(
                target,
                timed,
                *WALL_CLOCK,
            )
            return
        valued = {r.stop_criterion for r in target.runs if r.stop_value is not None}
        unvalued = [r for r in target.runs if r.stop_value is None and r.stop_criterion in valued]
        said = {r.id for r in target.runs} - {r.id for r in unvalued}
        criteria = sorted(
            {
                f"{r.stop_criterion}={r.stop_value:.12g}"
                if r.stop_value is not None
                else str(r.stop_criterion)
                for r in target.runs
                if r.id in said  # the runs that say it: mixed there is mixed, whatever the others record
            }
        )
        if unvalued and len(criteria) <= 1:
            yield self.cannot_verify(target, unvalued, *NO_VALUE)
            return
        if len(criteria) > 1:
            yield self.fail(
                target,
                target.runs,
                *mixed_criteria(criteria),
                criteria=criteria,
            )
