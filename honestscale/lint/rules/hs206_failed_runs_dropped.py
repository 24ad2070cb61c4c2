from __future__ import annotations

from collections.abc import Iterator

from honestscale.lint._engine import Finding, Rule, Said
from honestscale.view import Comparison, Run, View


def end_untold(untold: list[Run]) -> Said:
    return (
        f"{len(untold)} run(s) come from a log that does not say how they "
        "ended (" + "; ".join(sorted({_end_untold(r) for r in untold})) + ")",
        "record the run with honestscale.record or its callbacks (docs/record.md)",
    )


def no_run_stop(incomplete: int) -> Said:
    return (
        f"{incomplete} run(s) have no run_stop (killed, never collected)",
        "collect the jobs: their status (timeout, cancelled, failed) must be recorded",
    )


PLAN_NOT_RECORDED: Said = (
    "the campaign's planned runs are not recorded",
    "run campaigns with `honestscale campaign run SPEC` so the plan is recorded",
)


def planned_not_stored(missing: int) -> Said:
    return (
        f"{missing} planned run(s) are not in the store",
        "run or collect them; a failed run is recorded as failed, not left out",
    )


class FailedRunsDropped(Rule):
    """Failed, aborted, timed-out and killed runs must stay in the record of a comparison.

    What it checks: no run of the campaign is ``incomplete`` (an event file without run_stop: a killed
    job that was never collected as such), and every run the campaign spec planned (points x
    repetitions) is in the store, whatever its status. Without a recorded spec the planned runs are
    unknown and this cannot be verified.
    Why it misleads: keeping the three good runs of five, or dropping the configurations that crashed,
    biases every median and hides instability; MLPerf counts an aborted run as infinitely slow for that
    reason (Hoefler & Belli, SC15, rule 10 on reporting all results).
    Example: "median 38 min over 5 runs" where 2 more runs timed out and were discarded.
    Fix: run campaigns with honestscale campaign run (the spec is recorded) and collect every job,
    failed ones included.
    Reference: Hoefler & Belli, SC15, rule 10; MLPerf Training rules (aborted runs).
    """

    code = "HS206"
    name = "failed-runs-dropped"
    severity = "error"
    summary = "every planned run is recorded, failed and killed ones included"

    def targets(self, view: View) -> list[Comparison]:
        return view.of_kind("campaign")

    def check(self, target: Comparison, view: View) -> Iterator[Finding]:
        incomplete = [r for r in target.runs if r.status == "incomplete" and not _end_untold(r)]
        untold = [r for r in target.runs if r.status in ("incomplete", "end_unknown") and _end_untold(r)]
        if untold:
            yield self.cannot_verify(target, untold, *end_untold(untold))
        if incomplete:
            yield self.fail(target, incomplete, *no_run_stop(len(incomplete)))
        spec = view.campaigns.get(target.key.get("campaign") or "", {})
        planned = spec.get("planned_runs")
        if not planned:
            yield self.cannot_verify(target, target.runs, *PLAN_NOT_RECORDED)
            return
        present = {r.id for r in target.runs}
        missing = sorted(set(planned) - present)
        if missing:
            yield self.fail(
                target,
                target.runs,
                *planned_not_stored(len(missing)),
                missing=missing[:20],
                planned=len(planned),
            )


def _end_untold(run: Run) -> str:
    """Why an imported run's log cannot tell how it ended (``imported.stop``), else ''."""
    return str((run.imported or {}).get("stop") or "")
