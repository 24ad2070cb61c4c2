from __future__ import annotations

from collections.abc import Iterator

from honestscale.lint._engine import Finding, Rule, Said
from honestscale.view import Comparison, View

RATE_WORDS = ("per_s", "per_sec", "throughput", "speedup", "efficiency", "rate", "flops")

ARITHMETIC_SETTING: Said = (
    "the campaign's report is set to an arithmetic mean of rates",
    'set [report] rate_mean = "harmonic" (or remove it)',
)


def averaged_metrics(bad: list[str]) -> Said:
    return (
        f"metrics that average rates arithmetically: {', '.join(bad)}",
        "record the raw values; summarise rates with the median or harmonic mean",
    )


class ArithmeticMeanOfRates(Rule):
    """Rates and ratios must not be summarised by their arithmetic mean.

    What it checks: the campaign's report settings do not ask for an arithmetic mean of rates
    (``[report] rate_mean = "arithmetic"`` in the spec), and no run records a metric that is an
    arithmetic mean of a rate or ratio (``mean_*`` / ``avg_*`` of throughput, speedup, efficiency).
    Why it misleads: the arithmetic mean of rates weights fast runs too little and is not the rate of
    the total work; the mean of ratios depends on which side is the base (Hoefler & Belli, SC15, rule 3).
    Example: mean images/s over 5 runs of 900, 1000, 1000, 1000, 2000: arithmetic 1180, harmonic 1084.
    Fix: report the median, or the harmonic mean for rates (the time-weighted rate); honestscale's
    report does.
    Reference: Hoefler & Belli, SC15, rule 3; Fleming & Wallace, CACM 1986.
    """

    code = "HS203"
    name = "arithmetic-mean-of-rates"
    severity = "error"
    summary = "rates and ratios are summarised by median or harmonic mean, not arithmetic mean"

    def targets(self, view: View) -> list[Comparison]:
        return view.of_kind("campaign")

    def check(self, target: Comparison, view: View) -> Iterator[Finding]:
        spec = view.campaigns.get(target.key.get("campaign") or "", {})
        if str((spec.get("report") or {}).get("rate_mean", "harmonic")).lower() == "arithmetic":
            yield self.fail(
                target,
                target.runs,
                *ARITHMETIC_SETTING,
                setting="rate_mean = arithmetic",
            )
        bad = sorted(
            {
                e.metric
                for r in target.runs
                for e in r.evals
                if e.metric.lower().startswith(("mean_", "avg_", "average_"))
                and any(w in e.metric.lower() for w in RATE_WORDS)
            }
        )
        if bad:
            runs = [r for r in target.runs if any(e.metric in bad for e in r.evals)]
            yield self.fail(
                target,
                runs,
                *averaged_metrics(bad),
                metrics=bad,
            )
