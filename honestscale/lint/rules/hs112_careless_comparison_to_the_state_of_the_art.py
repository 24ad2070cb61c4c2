from __future__ import annotations

from collections.abc import Iterator

from honestscale.lint._engine import Finding, Rule
from honestscale.view import Comparison, View


class CarelessComparisonToTheStateOfTheArt(Rule):
    """A comparison with a baseline gives both time and accuracy, on the same dataset and target.

    What it checks: in a campaign with ``purpose = "baseline"`` runs, baselines and final runs of the
    same model family were trained on the same dataset to the same stop target, and every one of them
    has a time to train and a final accuracy.
    Why it misleads: beating a baseline on time while it trained to a higher accuracy, on another dataset
    or split, compares different problems (Hoefler 2018, "compare carefully to the state of the art" -
    the trap is comparing carelessly).
    Example: "2x faster than Horovod's published number" where that number trained to 76 % top-1 and
    the new run stopped at 74 %.
    Fix: rerun the baseline under the same dataset, target and stop criterion, and report time and
    accuracy for both.
    Reference: Hoefler 2018, rule 12.
    """

    code = "HS112"
    name = "compare-carelessly-to-the-state-of-the-art"
    severity = "warning"
    summary = "baselines are compared on time and accuracy, on the same dataset and target"

    def targets(self, view: View) -> list[Comparison]:
        return [c for c in view.of_kind("campaign") if any(r.purpose == "baseline" for r in c.runs)]

    def check(self, target: Comparison, view: View) -> Iterator[Finding]:
        base = [r for r in target.runs if r.purpose == "baseline"]
        final = [r for r in target.runs if (r.purpose or "final") == "final"]
        if not final:
            return
        incomplete = [r for r in base + final if r.time_to_train_s is None or r.final_value is None]
        if incomplete:
            yield self.fail(target, incomplete, "a baseline comparison lacks time or accuracy for some runs",
                            "record both time to train and final accuracy for baselines and new runs")  # fmt: skip
            return
        setups = {(r.dataset, r.stop_criterion, r.stop_value, r.final_split) for r in base + final}
        if len(setups) > 1:
            yield self.fail(
                target,
                base + final,
                "baseline and new runs differ in dataset, stop target or evaluated split",
                "train the baseline on the same dataset to the same target and evaluate the same split",
                setups=sorted(str(s) for s in setups),
            )
