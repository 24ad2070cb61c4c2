from __future__ import annotations

from collections.abc import Iterator

from honestscale.lint._engine import Finding, Rule, Said
from honestscale.view import Comparison, View


def not_end_to_end(scopes: list[str]) -> Said:
    return (
        f"scaling measured on {', '.join(scopes)} only, not end to end",
        "time whole training steps; show kernels as a breakdown of them",
    )


SCOPE_UNKNOWN: Said = (
    "the runs do not say what was timed",
    "record scope (end_to_end, layer, kernel, communication) in run_start",
)


class KernelsOnlyWhenScaling(Rule):
    """A scaling claim must rest on end-to-end training, not on kernels, layers or communication alone.

    What it checks: every run of a scaling series has ``scope = "end_to_end"``.
    Why it misleads: an all-reduce or a convolution kernel scales much better than the training it is
    part of; extrapolating from the subset hides data loading, synchronisation and the serial rest
    (Hoefler 2018, "only report kernels or subsets when scaling").
    Example: "near-linear scaling to 1,024 GPUs" measured on the gradient all-reduce alone.
    Fix: time whole training steps (honestscale runners record scope end_to_end) and report kernels only as
    a breakdown of that.
    Reference: Hoefler 2018, rule 5.
    """

    code = "HS105"
    name = "kernels-only-when-scaling"
    old_names = ("only-kernels-when-scaling",)  # until 0.2: an imperative, not the bad practice
    severity = "error"
    summary = "scaling series are measured end to end"
    reach = "ratios"  # about the series: its speedups, efficiencies and predictions

    def targets(self, view: View) -> list[Comparison]:
        return view.of_kind("scaling")

    def check(self, target: Comparison, view: View) -> Iterator[Finding]:
        partial = [r for r in target.runs if r.scope not in (None, "end_to_end")]
        unknown = [r for r in target.runs if r.scope is None]
        if partial:
            scopes = sorted({str(r.scope) for r in partial})
            yield self.fail(target, partial, *not_end_to_end(scopes), scopes=scopes)
        elif unknown:
            yield self.cannot_verify(target, unknown, *SCOPE_UNKNOWN)
