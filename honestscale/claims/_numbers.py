"""The store's number behind a claim: the one the report prints (``report.analyse``) or the one ``compare``
decides on, with its 95 % interval where there is one, the runs behind it and the rules' verdicts about them.

Nothing is computed here that the report or ``compare`` computes otherwise: a point's number is read off the
report's model (a ``config`` comparison for a measure of one setup, the ``scaling`` series for a ratio over its base
case); intervals the model keeps no copy of (a throughput's, an accuracy's) come from ``analysis.stats``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from honestscale.analysis import stats
from honestscale.analysis.mlperf import rules_of
from honestscale.analysis.points import Point, ratio_rules, sig
from honestscale.analysis.scaling import TTA, TTT, rates, time_metric, times
from honestscale.analysis.stats import MIN_INTERVAL_RUNS, RATE_STATISTIC, TIME_STATISTIC, hmean_ci, median_ci
from honestscale.claims._file import ACROSS, Claim
from honestscale.compare import SelectorError, in_context, parse_selector, select_side
from honestscale.report import ComparisonModel, Model, analyse
from honestscale.view import Run, View

# the analysis model of a claim's context, by the campaigns of its runs (a context is every run of those campaigns)
Models = dict[frozenset[str | None], Model]
RATIO_STATISTIC = "ratio of the medians over the base case (bootstrap 95 % interval over the runs of both)"
MLPERF_RATIO_STATISTIC = (
    "ratio of the MLPerf official scores (olympic means x scaling.json) over the base case"
)
RATE_RATIO_STATISTIC = "ratio of the harmonic means over the base case (bootstrap 95 % interval)"


@dataclass(frozen=True)
class Number:
    """A number of the store, as printed beside the claim."""

    name: str  # "time to accuracy at 2 workers"
    value: float
    low: float | None
    high: float | None
    n: int  # the successful runs it comes from
    statistic: str  # which statistic it is
    unit: str
    runs: tuple[str, ...]  # every run behind it (both worker counts for a ratio)
    lint: dict[str, list[str]] = field(
        default_factory=dict
    )  # fail / cannot_verify / error / suppressed: codes
    by_nature: str | None = None  # why it has no interval whatever the runs (an MLPerf score: one number)
    values: tuple[float, ...] = ()  # the runs' own values, for the statistic a claim names (best, mean)
    better: str = "higher"

    @property
    def has_interval(self) -> bool:
        return self.low is not None and self.high is not None

    @property
    def shown(self) -> str:
        """The value with its unit: ``2.424x``, ``1.776 s``."""
        return f"{sig(self.value)}" + {"": "", "x": "x"}.get(self.unit, f" {self.unit}")

    def describe(self) -> str:
        """``name: value unit (statistic; 95 % interval [low, high] or why none; n = N)``: how every output of a
        claim states the store's number."""
        interval = (
            f"95 % interval [{sig(self.low)}, {sig(self.high)}]"
            if self.has_interval
            else self.by_nature or "no interval"
        )
        return f"{self.name}: {self.shown} ({self.statistic}; {interval}; n = {self.n})"

    @property
    def more_runs(self) -> int:
        """How many more successful runs an interval needs (0 when it has one or none is possible)."""
        return 0 if self.has_interval or self.by_nature else max(MIN_INTERVAL_RUNS - self.n, 1)


class CannotVerify(Exception):
    """What is missing to verify a claim (runs, the base case, a measure the runs did not record ...)."""


def selected(view: View, text: str, where: str) -> list[Run]:
    """The final runs a claim's selector keeps (``compare``'s rules: superseded, tuning and smoke runs left out)."""
    try:
        return select_side(view, parse_selector(text, view.runs), "runs", {})
    except SelectorError as exc:
        raise CannotVerify(f"{exc.message} ({where}){f': {exc.fix}' if exc.fix else ''}") from None


def _at(filters: tuple[tuple[str, str], ...], runs: Sequence[Run], name: str = "at") -> list[Run]:
    """The runs at a claim's point (every filter of ``at``, or of ``base``, read as a selector's)."""
    if not filters:
        return list(runs)
    try:
        return parse_selector(",".join(f"{k}={v}" for k, v in filters), runs).select(runs)
    except SelectorError as exc:
        raise CannotVerify(f"{name}: {exc.message}") from None


def _series(claim: Claim, model_comparisons: Sequence[ComparisonModel], at_ids: set[str]) -> ComparisonModel:
    kind = "scaling" if claim.ratio or claim.relation in ("faster", "slower") else "config"
    found = [c for c in model_comparisons if c.kind == kind and at_ids & set(c.runs)]
    if not found:
        what = "a scaling series (two worker counts or more of one setup)" if kind == "scaling" else "a setup"
        raise CannotVerify(f"the runs selected hold no {what} at {_point_text(claim)}")
    if len(found) > 1:
        labels = "; ".join(c.label for c in found[:4])
        raise CannotVerify(
            f"the runs selected hold {len(found)} {'series' if kind == 'scaling' else 'setups'} at "
            f"{_point_text(claim)} ({labels}): add filters to 'runs' that keep one"
        )
    return found[0]


def _point_text(claim: Claim) -> str:
    return ", ".join(f"{k} = {v}" for k, v in claim.at) or "every point"


def point_number(
    view: View, claim: Claim, where: str, models: Models | None = None
) -> tuple[Number, list[str]]:
    """The store's number for a claim about one point (or a point against its series' base case), with notes;
    ``models`` holds the analysis of each context made before (one per set of campaigns, for every claim)."""
    found = selected(view, claim.runs, where)
    at_runs = _at(claim.at, found)
    if not at_runs:
        counts = sorted({r.workers for r in found if r.workers})
        raise CannotVerify(
            f"no run at {_point_text(claim)} among the {len(found)} selected "
            f"(worker counts there: {', '.join(map(str, counts)) or 'none'})"
        )
    context = frozenset(r.campaign for r in found)
    model = (models or {}).get(context) or analyse(in_context(view, found), forecasts=False)[0]
    if models is not None:
        models[context] = model
    series = _series(claim, model.comparisons, {r.id for r in at_runs})
    workers = claim.workers or (at_runs[0].workers or 1)
    point = next((p for p in series.points if p.workers == workers), None)
    if point is None:
        raise CannotVerify(f"{series.label} has no point at {workers} workers")
    by_id = {r.id: r for r in view.runs}
    runs = [by_id[i] for i in point.run_ids if i in by_id]
    notes = [f"the series ({series.label}) is {series.split_note}"] if series.split_note else []
    if (
        claim.measure == "mlperf_score"
        and (rules := rules_of(runs[0]) if runs else None)
        and rules.runs != len(runs)
    ):
        notes.append(f"n = {len(runs)}: the round's rules ask {rules.runs} result files of a submission")
    if claim.ratio or claim.relation in ("faster", "slower"):
        base, holder = _base(claim, series, model.comparisons, found)
        if point is base:
            raise CannotVerify(f"{workers} workers is the series' base case: its ratio is 1 by definition")
        notes.append(f"over the base case at {base.workers} worker(s) (n = {base.succeeded}), {holder.label}")
        if base is series.points[0]:
            return _ratio_number(claim, point, base), notes
        return _ratio_over(claim, point, base, by_id), notes
    return _absolute(claim, point, runs), notes


def _base(
    claim: Claim, series: ComparisonModel, comparisons: Sequence[ComparisonModel], found: Sequence[Run]
) -> tuple[Point, ComparisonModel]:
    """The base case of a claim's ratio and what holds it: the series' first point, or the point ``base`` names,
    in the series or, where the claim allows the label that differs (``across``), in a setup of another label."""
    if not claim.base:
        return series.points[0], series
    named = ", ".join(f"{k} = {v}" for k, v in claim.base)
    ids = {r.id for r in _at(claim.base, found, "base")}
    own = next((p for p in series.points if ids and ids <= set(p.run_ids)), None)
    if own is not None:
        return own, series
    held = [
        (c, p) for c in comparisons if c.kind == "config" for p in c.points if ids and ids <= set(p.run_ids)
    ]
    if not held:
        raise CannotVerify(f"no point of the runs selected is the base case {named}")
    c, p = held[0]
    differs = [f for f in ACROSS if c.key.get(f) != series.key.get(f)]
    if not differs or not set(differs) <= set(claim.across):
        labels = "; ".join(
            f"{f} {c.key.get(f)!r} there, {series.key.get(f)!r} in the series" for f in differs
        )
        raise CannotVerify(
            f"the base case {named} is not a point of the series ({labels or 'another setup'}): name the label it "
            f"differs in, across = {differs or list(ACROSS)}, to take it across"
        )
    return p, c


def _ratio_over(claim: Claim, p: Point, base: Point, by_id: dict[str, Run]) -> Number:
    """A point's ratio over a base case the claim names (in the series, or across a label), from the runs of both:
    the series' own measures where it is its first point, else computed here as the report computes its own."""
    runs = [by_id[i] for i in p.run_ids if i in by_id]
    base_runs = [by_id[i] for i in base.run_ids if i in by_id]
    measure = (
        claim.measure
        if claim.ratio
        else ("throughput_speedup" if claim.measure == "throughput" else "speedup")
    )
    if measure.startswith("throughput"):
        mine_rates, base_rates = rates(runs, lambda r: r.throughput), rates(base_runs, lambda r: r.throughput)
        got, statistic = stats.ratio(mine_rates, base_rates, "hmean"), RATE_RATIO_STATISTIC
    elif p.mlperf_scored_s and base.mlperf_scored_s:
        got, statistic = stats.Estimate(base.mlperf_scored_s / p.mlperf_scored_s), MLPERF_RATIO_STATISTIC
    else:
        metric = time_metric(
            {base.workers: base_runs, p.workers: runs}
        )  # to accuracy where every run got there
        got, statistic = stats.ratio(times(base_runs, metric), times(runs, metric), "median"), RATIO_STATISTIC
    if got is None:
        raise CannotVerify(f"no {measure.replace('_', ' ')} over the base case at {base.workers} workers")
    scale = base.workers / p.workers if measure.endswith("efficiency") else 1.0
    low, high = (None, None) if got.low is None or got.high is None else (got.low * scale, got.high * scale)
    mlperf = low is None and p.mlperf_score_s is not None
    return _ratio_of(
        measure, p, base, (got.value * scale, low, high), statistic, _both(p.lint, base.lint), mlperf
    )


def _both(a: dict[str, list[str]], b: dict[str, list[str]]) -> dict[str, list[str]]:
    """The rules' verdicts on two points' runs together (a ratio across two setups is about both)."""
    return {k: sorted({*a.get(k, []), *b.get(k, [])}) for k in {*a, *b}}


def _ratio_number(claim: Claim, p: Point, base: Point) -> Number:
    measure = claim.measure
    if claim.relation in ("faster", "slower"):  # a point ordered against the base case: its speedup decides
        measure = "throughput_speedup" if claim.measure == "throughput" else "speedup"
        if claim.measure == "time_to_accuracy" and p.tta_s is None:
            raise CannotVerify(
                "the runs at this point did not all record reaching their target: no time to accuracy"
            )
    value, (low, high) = {
        "speedup": (p.speedup, p.speedup_ci),
        "efficiency": (p.efficiency, p.efficiency_ci),
        "throughput_speedup": (p.throughput_speedup, p.throughput_speedup_ci),
        "throughput_efficiency": (p.throughput_efficiency, p.throughput_efficiency_ci),
    }[measure]
    if value is None:
        raise CannotVerify(
            f"the series has no {measure.replace('_', ' ')} at {p.workers} workers "
            "(a weak-scaling series has no speedup of its time; no throughput was recorded)"
        )
    statistic = RATE_RATIO_STATISTIC if measure.startswith("throughput") else RATIO_STATISTIC
    mlperf = measure in ("speedup", "efficiency") and p.mlperf_score_s is not None
    if mlperf:
        statistic = MLPERF_RATIO_STATISTIC
    return _ratio_of(measure, p, base, (value, low, high), statistic, ratio_rules(p, measure), mlperf)


def _ratio_of(
    measure: str,
    p: Point,
    base: Point,
    number: tuple[float, float | None, float | None],
    statistic: str,
    lint: dict[str, list[str]],
    mlperf: bool,
) -> Number:
    """A point's ratio over a base case as a claim's number: its value and interval, the runs of both, the rules."""
    return Number(
        f"{measure.replace('_', ' ')} at {p.workers} workers",
        *number,
        min(p.succeeded, base.succeeded),
        statistic,
        "x",
        tuple(sorted({*p.run_ids, *base.run_ids})),
        lint,
        "one MLPerf score a point: no interval" if mlperf else None,
    )


def _absolute(claim: Claim, p: Point, runs: list[Run]) -> Number:
    m, at = claim.measure, f" at {p.workers} workers"
    ids, n, lint = tuple(sorted(p.run_ids)), p.succeeded, p.lint
    if m in ("time_to_train", "time_to_accuracy"):
        value, (low, high) = (p.time_s, p.time_ci) if m == "time_to_train" else (p.tta_s, p.tta_ci)
        if value is None:
            raise CannotVerify(
                f"no {m.replace('_', ' ')}{at}: the runs did not record "
                + ("reaching their target" if m == "time_to_accuracy" else "a time to train")
            )
        return Number(
            m.replace("_", " ") + at,
            value,
            low,
            high,
            n,
            TIME_STATISTIC,
            "s",
            ids,
            lint,
            values=tuple(times(runs, TTA if m == "time_to_accuracy" else TTT)),
            better="lower",
        )
    if m in ("throughput", "throughput_per_worker"):
        if p.throughput is None:
            raise CannotVerify(f"no throughput{at}: the runs recorded no timed steps")
        values = rates(runs, lambda r: r.throughput)
        low, high = hmean_ci(values)
        scale = 1.0 if m == "throughput" else 1 / p.workers
        value = p.throughput if m == "throughput" else (p.per_worker or p.throughput * scale)
        return Number(
            ("throughput" if m == "throughput" else "throughput per worker") + at,
            value,
            None if low is None else low * scale,
            None if high is None else high * scale,
            n,
            RATE_STATISTIC,
            "samples/s",
            ids,
            lint,
            values=tuple(v * scale for v in values),
        )
    if m == "accuracy":
        if p.accuracy is None:
            raise CannotVerify(f"no final quality{at}: the runs recorded no evaluation")
        values = [float(r.final_value) for r in runs if r.ok and r.final_value is not None]
        low, high = median_ci(values)
        return Number(
            f"{p.accuracy_metric or 'accuracy'} ({p.accuracy_split or 'final'} split){at}",
            p.accuracy,
            low,
            high,
            n,
            TIME_STATISTIC,
            "",
            ids,
            lint,
            values=tuple(values),
            better=p.accuracy_better,
        )
    if m == "energy":
        if p.energy_j is None:
            raise CannotVerify(f"no energy{at}: {p.energy_source}")
        return Number(
            p.energy_metric + at, p.energy_j, *p.energy_ci, n, TIME_STATISTIC, "J", ids, lint, better="lower"
        )
    if m == "mfu":
        if p.mfu is None:
            raise CannotVerify(f"no MFU{at}: the runs recorded no FLOPs per sample or no accelerator peak")
        return Number(
            f"MFU ({p.mfu.convention}){at}",
            p.mfu.median,
            p.mfu.low,
            p.mfu.high,
            p.mfu.runs,
            TIME_STATISTIC,
            "",
            ids,
            lint,
        )
    score = p.mlperf_scored_s
    if score is None:
        raise CannotVerify("no MLPerf score: the runs are not one MLPerf submission's, or too few succeeded")
    what = "the official score (olympic mean x scaling.json)" if p.mlperf_official_s else "the olympic mean"
    return Number(
        f"MLPerf score{at}",
        score,
        None,
        None,
        n,
        f"{what} of the runs' times to train",
        "s",
        ids,
        lint,
        by_nature="one score per submission: no interval",
        better="lower",
    )
