from __future__ import annotations

from collections.abc import Iterator

from honestscale.lint._engine import Finding, Rule, Said
from honestscale.view import Comparison, View


def study_not_recorded(lost: list[str]) -> Said:
    """Tuning trials are recorded, but not those of the studies the final runs name."""
    return (
        f"final runs name tuning study {', '.join(lost)}, whose trials are not recorded",
        "ingest the trials of that study",
    )


def no_trial_recorded(studies: set[str]) -> Said:
    return (
        f"final runs name tuning study {', '.join(sorted(studies))}, but no trial is recorded",
        "ingest the study's trials (purpose tuning)",
    )


NO_TUNING_RUNS: Said = (
    "no tuning runs are recorded for this campaign",
    "record the trials that chose the hyper-parameters ([tuning] in the campaign spec), or name the "
    'published recipe they come from ([campaign] recipe = "...")',
)


class TuningRunsHidden(Rule):
    """The tuning runs behind a final configuration must be recorded, and their cost shown.

    What it checks: a campaign with final runs also holds the tuning trials that chose their
    hyper-parameters (``purpose = "tuning"``); when the final runs name a tuning study, its trials are
    present. Their number and accelerator-hours are given as evidence, to stand beside the result.
    Why it misleads: a result found after hundreds of trials is presented as if the first attempt had
    produced it; the search cost (often larger than the final training) disappears (Hoefler 2018,
    "hide the tuning runs").
    Example: a time-to-accuracy of 20 minutes reached after a 300-trial learning-rate and batch sweep.
    Fix: run the search as a tuning study in the campaign spec (every trial is recorded), or state in
    the spec that the hyper-parameters were taken unchanged from a published recipe.
    Reference: Hoefler 2018, rule 3.
    """

    code = "HS103"
    name = "tuning-runs-hidden"
    old_names = ("hide-the-tuning-runs",)  # until 0.2: an imperative, not the bad practice
    severity = "warning"
    summary = "the tuning trials behind a result are recorded, with their count and cost"

    def targets(self, view: View) -> list[Comparison]:
        return view.of_kind("campaign")

    def check(self, target: Comparison, view: View) -> Iterator[Finding]:
        finals = [r for r in target.runs if (r.purpose or "final") == "final"]
        tuning = [r for r in target.runs if r.purpose == "tuning"]
        studies = {r.tuning_study for r in finals if r.tuning_study}
        hours = sum(r.accelerator_hours() or 0.0 for r in tuning)
        if tuning:
            recorded = {r.tuning_study for r in tuning}
            lost = sorted(s for s in studies if s not in recorded)
            if lost:
                yield self.fail(
                    target,
                    finals,
                    *study_not_recorded(lost),
                    missing_studies=lost,
                )
            return
        if studies:
            yield self.fail(
                target,
                finals,
                *no_trial_recorded(studies),
                missing_studies=sorted(studies),
            )
            return
        recipe = (view.campaigns.get(target.key.get("campaign") or "", {}).get("campaign") or {}).get(
            "recipe"
        )
        if recipe:
            return  # hyper-parameters declared as taken from a published recipe
        yield self.cannot_verify(
            target,
            finals,
            *NO_TUNING_RUNS,
            tuning_runs=0,
            tuning_accelerator_hours=hours,
        )
