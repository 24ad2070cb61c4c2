"""Each scaling series of a view predicted at larger (or other) worker counts: every measure the runs carry,
with the model chosen for it, the 95 % interval (:mod:`honestscale.analysis.prediction`), the rules' verdicts on
the runs behind it, and whether it may be quoted.

Which measures, from which runs (successful final runs, as every other number):

* ``time``: the time to accuracy where every run reached its target, else the time to train (median of runs);
* ``step_time``: the median synchronous step after the warm-up (median of runs);
* ``throughput``: samples/s over the timed steps (harmonic mean of runs);
* ``comm_share``: the share of the step time in measured communication (median of runs; a single worker's 0, no
  communication at all, is no point of a model fitted on relative errors, and is left out of it).

The laws join the candidates only where the series is what they describe: Amdahl's (``c0 + c1 / p``) for the
times of a strong-scaling series, Gustafson's (``c0 + c1 · p``) for the throughput of a weak one. A series whose
batch follows neither (``time_to_solution``: MLPerf's submitters choose it per scale, every run to one target; or
``mixed``) is modelled as such for its times
(the model is of the series' own recipe, batch and all, and says so); its time per step and throughput are
refused, as a step of one batch is no step of another.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from honestscale import extrap
from honestscale.analysis import prediction
from honestscale.analysis.points import (
    DO_NOT_QUOTE,
    FindingRecord,
    do_not_quote,
    lint_codes,
    sig,
    verdicts_text,
)
from honestscale.analysis.scaling import time_metric, times
from honestscale.analysis.stats import RATE_STATISTIC, TIME_STATISTIC
from honestscale.view import Comparison, Run, StepFractions, View, kind_words

MEASURES = ("time", "step_time", "throughput", "comm_share")


@dataclass(frozen=True)
class Check:
    """The largest worker count held back and predicted from the others, against its measured centre."""

    at: int
    measured: float
    predicted: float
    low: float | None
    high: float | None

    @property
    def inside(self) -> bool | None:
        return None if self.low is None or self.high is None else self.low <= self.measured <= self.high

    def text(self, unit: str) -> str:
        u = f" {unit}" if unit else ""
        interval = (
            "no interval" if self.low is None else f"95 % interval {sig(self.low)} to {sig(self.high)}{u}"
        )
        verdict = {True: "inside", False: "OUTSIDE its interval", None: "no interval to hold"}[self.inside]
        held = f"checked on this series: {self.at} workers held back and predicted from the smaller counts"
        return f"{held}, {sig(self.predicted)}{u} ({interval}); measured {sig(self.measured)}{u}: {verdict}"


@dataclass
class SeriesForecast:
    series: str  # the comparison's label
    comparison: str  # its id
    mode: str | None  # strong | weak | time_to_solution | mixed
    batches: str  # the global batch per worker count, as text
    runs: list[str]  # the run ids behind it (successful final runs)
    lint: dict[str, list[str]]  # the rules' verdicts on those runs
    samples: dict[str, dict[int, list[float]]]  # measure -> worker count -> each run's value
    predictions: list[prediction.Prediction] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)  # measure -> why it has no prediction
    recipe: str | None = None  # a mixed series: what its predictions are of
    split: str | None = None  # the label that parts its points from others of its kind (``Comparison.split``)
    metric: str = "time to train"  # what its time is: to accuracy where every run reached its target
    # measure -> its largest worker count predicted from the others, beside what was measured there: the series'
    # own check of the interval (with 4 or more worker counts)
    checks: dict[str, Check] = field(default_factory=dict)

    @property
    def verdicts(self) -> str:
        return verdicts_text(self.lint)

    def predictions_of(self, measure: str) -> list[prediction.Prediction]:
        return [p for p in self.predictions if p.measure == measure]


def _measure(name: str, metric: str, mode: str | None) -> prediction.Measure:
    strong, weak = mode == "strong", mode == "weak"
    if name == "time":
        return prediction.Measure(
            name, metric, "s", TIME_STATISTIC, (0.0, math.inf), ("amdahl",) if strong else ()
        )
    if name == "step_time":
        return prediction.Measure(
            name, "time per step", "s", TIME_STATISTIC, (0.0, math.inf), ("amdahl",) if strong else ()
        )
    if name == "throughput":
        return prediction.Measure(
            name, "throughput", "samples/s", RATE_STATISTIC, (0.0, math.inf), ("gustafson",) if weak else ()
        )
    return prediction.Measure(
        name, "communication share of the step time", "", TIME_STATISTIC, (0.0, 1.0), ()
    )


def _values(fractions: dict[str, StepFractions], name: str, runs: list[Run], metric: str) -> list[float]:
    if name == "time":
        return times(runs, metric)
    got: list[float | None]
    if name == "step_time":
        got = [r.steps.sync_median_s if r.steps else None for r in runs]
    elif name == "throughput":
        got = [r.throughput for r in runs]
    else:
        fr = [fractions.get(r.id) for r in runs]
        got = [f["comm"] if f and f.get("comm_measured") else None for f in fr]
    return [float(v) for v in got if v is not None and math.isfinite(v) and v > 0]


def _batches(points: dict[int, list[Run]]) -> str:
    return "; ".join(
        f"{w}: {', '.join(str(b) for b in sorted({r.global_batch_size for r in rs if r.global_batch_size}))}"
        for w, rs in points.items()
    )


def series(
    c: Comparison, fractions: dict[str, StepFractions], findings: list[FindingRecord]
) -> SeriesForecast:
    """The series' measures per worker count, its mode and the verdicts on its runs; nothing predicted yet."""
    points = {w: [r for r in rs if r.ok] for w, rs in c.by_workers().items()}
    points = {w: rs for w, rs in points.items() if rs}
    metric = time_metric(points)
    ids = sorted(r.id for rs in points.values() for r in rs)
    lint = lint_codes(findings, set(ids), "ratio")  # a prediction is a ratio's kin: the series' rules mark it
    out = SeriesForecast(c.label, c.id, c.mode, _batches(points), ids, lint, {}, metric=metric, split=c.split)
    for name in MEASURES:
        got = {w: v for w, rs in points.items() if (v := _values(fractions, name, rs, metric))}
        if got:
            out.samples[name] = got
    if c.mode not in ("strong", "weak"):
        out.recipe = (
            f"the global batch follows neither strong nor weak scaling ({out.batches}): a prediction is of a "
            "run that changes its batch with the workers as this series did, not of a fixed problem"
        )
        if c.classification is not None and c.classification.target:
            out.recipe = (
                f"time to solution: every run trains to one target ({c.classification.target}) with a batch "
                f"chosen per scale ({out.batches}); a prediction is of a run that chooses its batch as this "
                "series did"
            )
        for name in ("step_time", "throughput"):
            if out.samples.pop(name, None) is not None:
                out.refused[name] = (
                    f"{name.replace('_', ' ')} of different batches is no one quantity: {out.recipe}"
                )
    if c.hardware_note:
        out.refused.update(dict.fromkeys(out.samples, f"the {c.hardware_note}"))
        out.samples.clear()
    return out


def _judged(p: prediction.Prediction, s: SeriesForecast) -> None:
    """The series' own caveats on a prediction: its recipe, and the rules' error-severity failures on its runs."""
    if s.recipe:
        p.reasons.append(s.recipe)
    if flag := do_not_quote(s.lint):
        p.reasons.append(f"{flag} on the runs behind it")
        p.quote = False


def predicted(
    s: SeriesForecast, at: list[int] | None = None, draws: int = prediction.DRAWS
) -> SeriesForecast:
    """The series with each of its measures predicted at ``at`` (default: twice its largest worker count)."""
    metric = s.metric
    for name, samples in s.samples.items():
        measure = _measure(name, metric, s.mode)
        if len(samples) > prediction.QUOTE_SCALES - 1:
            largest = max(samples)
            held = prediction.predict(
                measure, {w: v for w, v in samples.items() if w != largest}, largest, draws
            )
            if held.value is not None:
                s.checks[name] = Check(
                    largest, measure.centre(samples[largest]), held.value, held.low, held.high
                )
        for w in at or [2 * max(samples)]:
            p = prediction.predict(measure, samples, w, draws=draws)
            if p.value is not None:
                _judged(p, s)
            s.predictions.append(p)
    return s


def forecast(
    view: View, findings: list[FindingRecord], at: list[int] | None = None, draws: int = prediction.DRAWS
) -> list[SeriesForecast]:
    """Every scaling series of the view, each measure predicted at ``at`` (default: twice its largest worker
    count)."""
    return [
        predicted(series(c, view.fractions, findings), at, draws)
        for c in view.comparisons
        if c.kind == "scaling"
    ]


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f} %"


def _prediction_lines(p: prediction.Prediction) -> list[str]:
    head = f"  {p.text} ({p.statistic}) at {p.at} workers: "
    if p.value is None:
        return [head + f"no prediction: {p.refused}"]
    unit = f" {p.unit}" if p.unit else ""
    flag = "" if p.quote else f" — {DO_NOT_QUOTE}"
    interval = "no interval" if p.low is None else f"95 % interval {sig(p.low)} to {sig(p.high)}{unit}"
    out = [head + f"{sig(p.value)}{unit}, {interval}{flag}"]
    out.append(f"    model: {p.model_kind}, {p.model} (leave-one-out error {_pct(p.cv_error)}; p = workers)")
    if p.runners_up:
        out.append("    next: " + "; ".join(f"{m} ({_pct(e)})" for m, e in p.runners_up))
    out += [f"    {r}" for r in p.reasons]
    return out


def check_lines(s: SeriesForecast) -> list[str]:
    """Each measure's check on the series itself, as a sentence naming the measure."""
    units = {p.measure: (p.text, p.unit) for p in s.predictions}
    return [f"{units[m][0].capitalize()}: {c.text(units[m][1])}" for m, c in s.checks.items() if m in units]


def extrap_lines(forecasts: list[SeriesForecast]) -> list[str]:
    """Every series' measured values as Extra-P's JSON Lines input (``predict --extrap FILE``)."""
    return list(extrap.lines((s.series, m, v) for s in forecasts for m, v in s.samples.items()))


def lines(forecasts: list[SeriesForecast]) -> list[str]:
    """What ``honestscale predict`` prints: per series its runs, the rules' verdicts on them, each prediction with
    its statistic, interval and model, and what is refused and why."""
    out = []
    for s in forecasts:
        scales = sorted({w for got in s.samples.values() for w in got})
        out.append(
            f"{s.series} ({kind_words(s.mode)} scaling; {len(s.runs)} successful runs at "
            f"{', '.join(map(str, scales)) or 'no'} workers)"
        )
        out.append(f"  rules on these runs: {s.verdicts}")
        if s.split:
            out.append(f"  {s.split}: the other labels' points are not in this series or its predictions")
        for p in s.predictions:
            out += _prediction_lines(p)
            if (check := s.checks.get(p.measure)) is not None and p is s.predictions_of(p.measure)[0]:
                out.append(f"    {check.text(p.unit)}")
        out += [f"  {m.replace('_', ' ')}: not predicted: {why}" for m, why in s.refused.items()]
        out.append("")
    return out
