from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from honestscale.analysis import compare
from honestscale.analysis.compare import Ordering
from honestscale.lint._engine import Finding, Rule, Said
from honestscale.view import Comparison, View


def untestable(o: Ordering) -> Said:
    """Samples too small for any test to reach 5 %."""
    d = o.difference
    return (
        f"{o.a} vs {o.b}: with n = {d.n_a} and {d.n_b} no test can tell the two apart at 5 %",
        "repeat each configuration (4 runs against 4 can reach p < 0.05; 6 give intervals)",
    )


def not_supported(o: Ordering, ratio: float) -> Said:
    d = o.difference
    return (
        f"{o.a} is {ratio:.2f}x the {o.measure} of {o.b}, but {d.describe()}",
        f'say "no significant difference with n = {d.n_a} and {d.n_b}", or repeat the runs until the '
        "test or the intervals decide (campaign run --until-ci 5%)",
    )


class OrderingNotSupportedByTheData(Rule):
    """An ordering ("2 workers are faster", "TensorFlow is slower than PyTorch") needs a test that supports it.

    What it checks: every ordering the outputs state, that is every worker count of a scaling series against its
    base case (on the series' time metric, the two sides of the speedup), every framework of a framework
    comparison against the fastest (median time to train), and every parallel layout of a layout comparison
    against the fastest (median time to the target, else to train, as the report's section orders them). The two
    sets of runs differ by the one decision rule every output uses (``analysis.stats.DECISION_RULE``): the
    two-sided Mann-Whitney U test at 5 %, the 95 % interval of the ratio printed beside them (the speedup) and,
    where both sides have one, the intervals of their medians must all say so (disjoint medians' intervals say
    so; overlapping ones are no evidence either way); where they disagree, the tests disagree and no ordering is
    supported. An ordering that the rule does not support fails, with the evidence; sample sizes too small for
    any test to reach 5 % (Mann-Whitney's smallest p-value is 2 / C(n_a + n_b, n_a), so 3 runs against 3 can
    never get below 0.1) and for any interval (6 runs a side) cannot be verified.
    Why it misleads: medians of a few noisy runs always differ a little; reading "1.04x faster" off them
    states an ordering that another set of repetitions would reverse. Comparing medians without a test, or
    with overlapping error bars, is the most common unsupported claim in performance papers (SC15, rule 7).
    Example: PyTorch 41.8 s and TensorFlow 43.1 s median time to train over 6 runs each, reported as "PyTorch
    is 3 % faster"; Mann-Whitney p = 0.39, the intervals overlap.
    Fix: say "no significant difference with n = 6 and 6 (p = 0.39)", or repeat the runs until the test or the
    intervals decide (``campaign run --until-ci``), on quieter nodes.
    Reference: Hoefler & Belli, SC15, rule 7 ("compare ... with statistically sound methods"); Mann & Whitney
    (1947).
    """

    code = "HS212"
    name = "ordering-not-supported-by-the-data"
    severity = "warning"
    summary = "an ordering of two configurations is stated only where a test supports it"
    reach = "ratios"  # about the series: its speedups, efficiencies and predictions

    def targets(self, view: View) -> list[Comparison]:
        return view.of_kind("scaling", "framework", "layout")

    def check(self, target: Comparison, view: View) -> Iterator[Finding]:
        if target.kind == "scaling":
            orderings = compare.scaling(target.by_workers())
        elif target.kind == "layout":  # every parallel layout against the fastest, as the report orders them
            orderings = compare.layouts(compare.layout_groups(target.runs))
        else:  # the like-for-like setup, as the report's table compares it
            orderings = compare.frameworks(compare.framework_groups(target.runs))
        for o in orderings:
            runs = list(o.runs)
            d = o.difference
            evidence: dict[str, Any] = {
                "a": o.a,
                "b": o.b,
                "measure": o.measure,
                "a_median": o.a_median,
                "b_median": o.b_median,
                "p_value": d.p_value,
                "n": [d.n_a, d.n_b],
                "intervals_overlap": d.intervals_overlap,
                "verdict": d.verdict,
            }
            if d.significant or o.ratio is None:
                continue
            if not o.testable:
                yield self.cannot_verify(
                    target,
                    runs,
                    *untestable(o),
                    **evidence,
                )
                continue
            yield self.fail(
                target,
                runs,
                *not_supported(o, o.ratio),
                **evidence,
            )
