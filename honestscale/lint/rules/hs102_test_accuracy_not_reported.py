from __future__ import annotations

from collections.abc import Iterator

from honestscale.lint._engine import Finding, Rule, Said
from honestscale.view import Comparison, View


def not_test(splits: list[str]) -> Said:
    return (
        f"the reported accuracy is a {'/'.join(splits)} accuracy, not a test accuracy",
        "evaluate a held-out test split once, at the end, and report it",
    )


NO_ACCURACY: Said = (
    "no run of this configuration recorded an accuracy",
    "record eval events (split test) at the end of every run",
)


class TestAccuracyNotReported(Rule):
    """The reported accuracy must come from a held-out test split.

    What it checks: the final accuracy of every run of a configuration is measured on the ``test``
    split, not on ``train`` or on the ``validation`` split used for early stopping and selection.
    Why it misleads: a model selected (or stopped) on the validation split is optimistically biased on
    that split; train accuracy measures memorisation. Only an untouched test split estimates
    generalisation (Hoefler 2018, "do not report test accuracy").
    Example: MLPerf ResNet logs report top-1 on the ImageNet validation set, which also decides when
    training stops.
    Fix: keep a test split that nothing selects on and evaluate it once, at the end (honestscale's
    runners do); report that number.
    Reference: Hoefler 2018, rule 2.
    """

    code = "HS102"
    name = "test-accuracy-not-reported"
    old_names = ("do-not-report-test-accuracy",)  # until 0.2: an imperative, not the bad practice
    severity = "warning"
    summary = "the reported accuracy is measured on a held-out test split"

    def check(self, target: Comparison, view: View) -> Iterator[Finding]:
        splits = {r.id: r.final_split for r in target.runs if r.final_value is not None}
        wrong = [r for r in target.runs if splits.get(r.id) in ("train", "validation")]
        if wrong:
            found = sorted({str(splits[r.id]) for r in wrong})
            yield self.fail(
                target,
                wrong,
                *not_test(found),
                splits=found,
                runs_affected=len(wrong),
            )
        elif not splits:
            yield self.cannot_verify(target, target.runs, *NO_ACCURACY)
