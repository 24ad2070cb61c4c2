from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from honestscale.lint._engine import Finding, Rule, Said
from honestscale.view import PROBLEM, Comparison, View

INCOMPLETE_BASELINE: Said = (
    "a baseline comparison lacks time or accuracy for some runs",
    "record both time to train and final accuracy for baselines and new runs",
)
DIFFERENT_SETUPS: Said = (
    "baseline and new runs differ in dataset, stop target or evaluated split",
    "train the baseline on the same dataset to the same target and evaluate the same split",
)
INCOMPLETE_PAIR: Said = (
    "a compared run lacks its time to train or its final accuracy",
    "record both time to train and final accuracy on both sides",
)


def different_problems(problem: list[dict[str, Any]], state_of_the_art: bool) -> Said:
    """What differs between A and B among the fields that define the problem (``PROBLEM``)."""
    what = "; ".join(f"{d['name']} {', '.join(d['a'])} (A) against {', '.join(d['b'])} (B)" for d in problem)
    sota = " (the state of the art)" if state_of_the_art else ""
    return (
        f"A and B{sota} solve different problems: {what}; their times do not compare",
        "train both sides on the same dataset to the same target metric and value (the MLPerf benchmark's "
        "own target and dataset when comparing with a submission)",
    )


class CarelessComparisonToTheStateOfTheArt(Rule):
    """A comparison with a baseline gives both time and accuracy, on the same dataset and target.

    What it checks: in a campaign with ``purpose = "baseline"`` runs, baselines and final runs of the
    same model family were trained on the same dataset to the same stop target, and every one of them
    has a time to train and a final accuracy. The same of each pair ``honestscale compare A B`` makes, above all
    against MLPerf submissions (the state of the art): both sides train the same model on the same dataset to the
    same target metric and value, and have a time and an accuracy; what differs is named.
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
    name = "careless-comparison-to-the-state-of-the-art"
    old_names = (
        "compare-carelessly-to-the-state-of-the-art",
    )  # until 0.2: an imperative, not the bad practice
    severity = "warning"
    summary = "baselines are compared on time and accuracy, on the same dataset and target"

    def targets(self, view: View) -> list[Comparison]:
        baselines = [c for c in view.of_kind("campaign") if any(r.purpose == "baseline" for r in c.runs)]
        return baselines + view.of_kind("pair")

    def check(self, target: Comparison, view: View) -> Iterator[Finding]:
        if target.kind == "pair":
            yield from self._pair(target)
            return
        base = [r for r in target.runs if r.purpose == "baseline"]
        final = [r for r in target.runs if (r.purpose or "final") == "final"]
        if not final:
            return
        incomplete = [r for r in base + final if r.time_to_train_s is None or r.final_value is None]
        if incomplete:
            yield self.fail(
                target,
                incomplete,
                *INCOMPLETE_BASELINE,
            )
            return
        setups = {(r.dataset, r.stop_criterion, r.stop_value, r.final_split) for r in base + final}
        if len(setups) > 1:
            yield self.fail(
                target,
                base + final,
                *DIFFERENT_SETUPS,
                setups=sorted(str(s) for s in setups),
            )

    def _pair(self, target: Comparison) -> Iterator[Finding]:
        incomplete = [r for r in target.runs if r.ok and (r.time_to_train_s is None or r.final_value is None)]
        if incomplete:
            yield self.fail(
                target,
                incomplete,
                *INCOMPLETE_PAIR,
            )
        problem = [d for d in target.key.get("differs") or [] if d["field"] in PROBLEM]
        if problem:
            yield self.fail(
                target,
                target.runs,
                *different_problems(problem, bool(target.key.get("state_of_the_art"))),
                differs=[d["field"] for d in problem],
            )
