from __future__ import annotations

from collections.abc import Iterator

from honestscale.lint._engine import Finding, Rule, Said
from honestscale.lint._fold import apart
from honestscale.view import Comparison, View

ALPHA = 0.05


def too_few_to_test(runs: int) -> Said:
    return (
        f"{runs} run(s): normality cannot be tested",
        "run at least 3 (better 6) repetitions, or use the median and a nonparametric CI",
    )


def not_normal(p: float) -> Said:
    return (
        f"times to train are not normal (Shapiro-Wilk p = {apart(p, ALPHA, 3)}) "
        "but the report is set to mean / normal interval",
        'use [report] center = "median" and ci = "nonparametric"',
    )


class NormalityAssumed(Rule):
    """Mean and standard deviation (or a t-interval) need normally distributed times; check before assuming.

    What it checks: when the campaign's report is set to parametric statistics (``[report] center =
    "mean"`` or ``ci = "normal"``), a Shapiro-Wilk test does not reject normality of each configuration's
    times to train (p >= 0.05); where it does, the parametric summary fails. A configuration with fewer
    than 3 successful runs cannot be tested: cannot verify. With the default (median and nonparametric
    interval) there is nothing to assume.
    Why it misleads: run times on shared systems are skewed (a few slow runs from interference); a mean
    with a t-interval then misplaces the centre and gives a wrong interval (Hoefler & Belli, SC15,
    rule 4).
    Example: five runs of 41, 41, 42, 42 and 58 minutes reported as 44.8 +- 7.3 min.
    Fix: report the median with a nonparametric interval (the default), or test normality first.
    Reference: Hoefler & Belli, SC15, rule 4.
    """

    code = "HS204"
    name = "normality-assumed"
    severity = "warning"
    summary = "parametric summaries only where normality was checked"

    def targets(self, view: View) -> list[Comparison]:
        return [c for c in view.of_kind("config") if _parametric(view, c)]

    def check(self, target: Comparison, view: View) -> Iterator[Finding]:
        from scipy import stats  # imported when used: it costs every command half a second

        times = [r.time_to_train_s for r in target.runs if r.ok and r.time_to_train_s is not None]
        if len(times) < 3:
            yield self.cannot_verify(
                target,
                target.runs,
                *too_few_to_test(len(times)),
            )
            return
        if len(set(times)) == 1:
            return
        p = float(stats.shapiro(times).pvalue)
        if p < ALPHA:
            yield self.fail(
                target,
                target.runs,
                *not_normal(p),
                shapiro_p=round(p, 4),
                times_s=[round(t, 3) for t in times],
            )


def _parametric(view: View, target: Comparison) -> bool:
    report = view.campaigns.get(target.key.get("campaign") or "", {}).get("report") or {}
    return bool(report.get("center") == "mean" or report.get("ci") == "normal")
