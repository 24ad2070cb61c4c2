"""One worker count of a comparison, over its repetitions: the numbers ``summary``, ``report`` and ``advise`` print.

Every number says which statistic it is (``stats.TIME_STATISTIC``, ``stats.RATE_STATISTIC``): times are
medians of the successful runs with their order-statistic interval, rates the harmonic mean of the runs'
samples/s over their timed steps (warm-up excluded), step shares the median of the runs' shares.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from statistics import median
from typing import Any, Literal, TypedDict

from honestscale import catalogue
from honestscale.analysis import energy, flops
from honestscale.analysis.flops import MfuSummary
from honestscale.analysis.mlperf import drop_for, scaling_factor
from honestscale.analysis.scaling import time_to_accuracy
from honestscale.analysis.stats import centre_of_rates, centre_of_times, median_ci, mlperf_score
from honestscale.view import Run, StepFractions, View, med

Part = Literal["data", "compute", "comm", "optimizer"]
PARTS: tuple[Part, ...] = ("data", "compute", "comm", "optimizer")


@dataclass
class Point:
    """One worker count of a comparison, over its repetitions."""

    workers: int
    runs: int
    succeeded: int
    global_batch: list[int]
    time_s: float | None  # median time to train of the successful runs
    time_ci: tuple[float | None, float | None]
    tta_s: float | None  # median time to accuracy
    tta_ci: tuple[float | None, float | None]
    mlperf_score_s: (
        float | None
    )  # MLPerf olympic mean of the runs' times to train (the benchmark's drop count)
    throughput: float | None  # samples/s, harmonic mean over runs
    per_worker: float | None
    steady_throughput: float | None  # samples per step over the median step, harmonic mean over runs
    stall_share: float | None  # median share of time to train lost to outlier steps (HS210)
    accuracy: float | None  # median final accuracy (the runs' target metric)
    accuracy_split: str | None
    breakdown: dict[str, float | None]  # fraction of step time
    comm: str  # measured | not exposed (hidden) | not recorded (no steps) | none (1 worker)
    run_ids: list[str] = field(default_factory=list)
    accuracy_metric: str | None = None  # the final metric's name, when the runs share one
    accuracy_better: str = "higher"  # its direction, from the benchmark catalogue
    # against the base case (report): the time metric (or MLPerf score) and throughput, with 95 % intervals
    speedup: float | None = None
    efficiency: float | None = None
    speedup_ci: tuple[float | None, float | None] = (None, None)
    efficiency_ci: tuple[float | None, float | None] = (None, None)
    throughput_speedup: float | None = None
    throughput_speedup_ci: tuple[float | None, float | None] = (None, None)
    throughput_efficiency: float | None = None
    throughput_efficiency_ci: tuple[float | None, float | None] = (None, None)
    # energy (analysis.energy): median over the successful runs, to accuracy where the time is, else to train
    energy_j: float | None = None
    # MLPerf: the official score, the olympic mean times the submission's scaling.json factor (None without one)
    mlperf_scaling_factor: float | None = None
    mlperf_official_s: float | None = None
    energy_ci: tuple[float | None, float | None] = (None, None)
    energy_metric: str = "energy to train"
    energy_source: str = "not recorded"
    mean_power_w: float | None = None  # median of the runs' energy to train over time to train
    energy_per_sample_j: float | None = None  # median of the runs' energy to train over samples trained
    energy_efficiency: float | None = None  # energy of the base case over this one's (1: no extra energy)
    energy_efficiency_ci: tuple[float | None, float | None] = (None, None)
    lint: dict[str, list[str]] = field(default_factory=dict)  # fail / cannot_verify / error: rule codes
    ratio_lint: dict[str, list[str]] = field(default_factory=dict)  # the same over these runs and the base's
    rate_ratio_lint: dict[str, list[str]] = field(default_factory=dict)  # ratio_lint, for its ratios of rates
    tokens_per_s: float | None = (
        None  # tokens/s (language models), harmonic mean over runs, each replica's once
    )
    tokens_per_worker: float | None = None
    mfu: MfuSummary | None = None  # MFU recomputed from the counts, median of runs with its interval

    @property
    def mlperf_scored_s(self) -> float | None:
        """The MLPerf score as the summarizer scores it: the olympic mean times scaling.json's factor (1 without
        one); what a series' speedups of MLPerf points are ratios of."""
        return (
            None if self.mlperf_score_s is None else self.mlperf_score_s * (self.mlperf_scaling_factor or 1.0)
        )


class FindingRecord(TypedDict):
    """A lint finding as JSON (``lint --format json``): what the numbers' verdicts are read from (the lint sits above
    the numbers and hands its findings down in this shape)."""

    code: str
    severity: str  # error, warning, info
    outcome: str  # fail, cannot_verify
    runs: list[str]
    comparison: str  # the comparison's id
    message: str
    evidence: dict[str, Any]
    fix: str
    suppressed: dict[str, str] | None  # {"reason": ...}
    reach: str  # which numbers it marks: runs | ratios | rate_ratios (lint._engine.REACHES)


class Findings(list[FindingRecord]):
    """The lint's findings (each as JSON), indexed by the runs and the comparison each is about.

    A report or an advice asks for the rules about a few runs once per point, series and campaign: with a plain
    list each question reads every finding of the store (the overview of 84 campaigns asked 7,992 questions of 7,728
    findings, and grew faster than the store). Built once from the findings; not to be appended to.
    """

    def __init__(self, findings: Iterable[FindingRecord] = ()) -> None:
        super().__init__(findings)
        self._by_run: dict[str, list[int]] = defaultdict(list)
        self._by_comparison: dict[str, list[FindingRecord]] = defaultdict(list)
        for i, f in enumerate(self):
            for run in f["runs"]:
                self._by_run[run].append(i)
            self._by_comparison[f["comparison"]].append(f)

    def about_runs(self, run_ids: set[str]) -> list[FindingRecord]:
        """The findings about any of these runs, in the lint's order."""
        return [self[i] for i in sorted({i for r in run_ids for i in self._by_run.get(r, ())})]

    def about_comparison(self, comparison: str) -> list[FindingRecord]:
        """The findings about this comparison (its id), in the lint's order."""
        return list(self._by_comparison.get(comparison, ()))


# The findings that mark a number, by what the number is (``lint_codes``'s ``number``): a point's own number is
# marked by findings about its runs; a series' ratio of times also by findings about the series; its ratio of rates
# also by findings about ratios of rates across different batches.
MARKED_BY = {
    "point": ("runs",),
    "ratio": ("runs", "ratios"),
    "rate_ratio": ("runs", "ratios", "rate_ratios"),
    "any": ("runs", "ratios", "rate_ratios"),
}


def lint_codes(findings: list[FindingRecord], run_ids: set[str], number: str = "any") -> dict[str, list[str]]:
    """The rules that fail, or cannot be verified, on any of these runs (suppressed findings left out), of the
    findings that mark ``number`` (``MARKED_BY``: ``point`` a point's own number, ``ratio`` a ratio of times over
    the series' base case or a prediction, ``rate_ratio`` a ratio of throughput; ``any`` every finding).

    ``findings`` as :class:`Findings` reads only those about the runs; a plain list is read whole."""
    out: dict[str, set[str]] = {"fail": set(), "cannot_verify": set(), "error": set(), "suppressed": set()}
    about = findings.about_runs(run_ids) if isinstance(findings, Findings) else findings
    reaches = MARKED_BY[number]
    for f in about:
        if not run_ids.intersection(f["runs"]) or f.get("reach", "runs") not in reaches:
            continue
        if f["suppressed"]:
            out["suppressed"].add(f["code"])
            continue
        out[f["outcome"]].add(f["code"])
        if f["outcome"] == "fail" and f["severity"] == "error":
            out["error"].add(f["code"])
    out["cannot_verify"] -= out["fail"]
    out["suppressed"] -= out["fail"] | out["cannot_verify"]
    return {k: sorted(v) for k, v in out.items()}


def ratio_rules(p: Point, measure: str) -> dict[str, list[str]]:
    """The rules' verdicts beside one of a point's ratios over its base case: ``rate_ratio_lint`` for a ratio of
    throughput (``throughput_speedup``, ``throughput_efficiency``, their ``_ci``), else ``ratio_lint``."""
    return p.rate_ratio_lint if measure.startswith("throughput") else p.ratio_lint


def sig(value: float | None, digits: int = 4) -> str:
    """``digits`` significant digits, thousands separated from 10^digits up: 0.1231, 2.79, 86,694."""
    if value is None:
        return "–"
    return f"{value:,.0f}" if abs(value) >= 10**digits else f"{value:.{digits}g}"


DO_NOT_QUOTE = "do not quote"


def do_not_quote(lint: dict[str, list[str]] | None) -> str | None:
    """``do not quote: error-severity HS209 fails`` where an error-severity rule fails on the runs behind a number
    (HS209: a superlinear point the data explains away, HS213: impossible times ...); else None."""
    errors = (lint or {}).get("error")
    return f"{DO_NOT_QUOTE}: error-severity {', '.join(errors)} fails" if errors else None


def verdicts_text(lint: dict[str, list[str]] | None, mark: bool = True) -> str:
    """The rules failing (✗) or unverifiable (?) on the runs behind a number; 'none' when there are none; and,
    unless ``mark`` is false (the caller marks it itself), ``do not quote`` where an error-severity rule fails."""
    if not lint:
        return "none"
    parts = []
    if lint.get("fail"):
        parts.append("✗ " + ", ".join(lint["fail"]))
    if lint.get("cannot_verify"):
        parts.append("? " + ", ".join(lint["cannot_verify"]))
    if lint.get("suppressed"):
        parts.append(", ".join(lint["suppressed"]) + " suppressed")
    flag = do_not_quote(lint) if mark else None
    return "; ".join(parts) + (f" — {flag}" if flag else "") if parts else "none"


def energies(runs: list[Run]) -> tuple[str, list[float]]:
    """The successful runs' energy to accuracy where every one reached its target, else their energy to train."""
    ok = [r for r in runs if r.ok]
    if ok and all(time_to_accuracy(r) is not None for r in ok):
        return "energy to accuracy", [e.joules for e in map(energy.to_accuracy, ok) if e is not None]
    return "energy to train", [e.joules for e in map(energy.to_train, ok) if e is not None]


def _shares(ok: list[Run], fractions: dict[str, StepFractions]) -> dict[str, float | None]:
    """Each part's median share of the step time over the runs that timed it."""
    shares: dict[str, float | None] = {}
    for part in PARTS:
        vals = [v for r in ok if r.id in fractions and (v := fractions[r.id][part]) is not None]
        shares[part] = median(vals) if vals else None
    return shares


def _comm(workers: int, ok: list[Run], fractions: dict[str, StepFractions]) -> str:
    """Whether the runs' gradient exchange was measured, hidden by the framework, or not there at all."""
    timed = [r for r in ok if r.id in fractions]
    if not timed:
        return "not recorded"
    if all(fractions[r.id].get("comm_measured") for r in timed):
        return "measured"
    return (
        "none (1 worker)" if workers == 1 else "not exposed"
    )  # 1 worker: nothing to exchange, nothing hidden


def _mlperf_scores(runs: list[Run]) -> tuple[float | None, float | None, float | None]:
    """MLPerf's olympic score of the runs, its scaling factor and the official score (their product)."""
    score = mlperf_score([r.time_to_train_s if r.ok else None for r in runs], drop_for(runs))
    factor = scaling_factor(runs)
    return score, factor, score * factor if score is not None and factor is not None else None


def _quality(ok: list[Run]) -> tuple[float | None, str | None, str | None, str]:
    """The runs' median final quality, its split(s), its metric (one, or none) and which way is better."""
    accs = [r.final_value for r in ok if r.final_value is not None]
    metrics = {r.final_metric for r in ok if r.final_value is not None}
    metric = metrics.pop() if len(metrics) == 1 else None
    return (median(accs) if accs else None, "/".join(sorted({r.final_split for r in ok if r.final_split})) or None,
            metric, catalogue.direction(metric, ok[0].mlperf if ok else None))  # fmt: skip


def _rates(workers: int, ok: list[Run]) -> tuple[float | None, float | None, float | None, float | None]:
    """Samples/s (harmonic mean of the runs) and per worker; tokens/s and per worker."""
    throughput = centre_of_rates([r.throughput for r in ok if r.throughput])
    tokens = centre_of_rates([r.tokens_per_s for r in ok if r.tokens_per_s])
    return (throughput, throughput / workers if throughput else None, tokens,
            tokens / workers if tokens else None)  # fmt: skip


def _steady(ok: list[Run]) -> tuple[float | None, float | None]:
    """Samples per second over the median step (harmonic mean of the runs), and the median share lost to stalls."""
    stalls = [r.lost_share for r in ok if r.lost_share is not None]
    return centre_of_rates([r.steady_rate for r in ok if r.steady_rate]), median(stalls) if stalls else None


def point(workers: int, runs: list[Run], fractions: dict[str, StepFractions], mlperf: bool) -> Point:
    """The runs at one worker count summarised: each number with the statistic it is and its interval."""
    ok = [r for r in runs if r.ok]
    times = [float(r.time_to_train_s) for r in ok if r.time_to_train_s is not None]
    ttas = [t for t in (time_to_accuracy(r) for r in ok) if t is not None]
    score, factor, official = _mlperf_scores(runs) if mlperf else (None, None, None)
    accuracy, split, metric, better = _quality(ok)
    throughput, per_worker, tokens, tokens_per_worker = _rates(workers, ok)
    steady, stall = _steady(ok)
    energy_metric, joules = energies(runs)
    return Point(
        workers=workers, runs=len(runs), succeeded=len(ok),
        global_batch=sorted({int(r.global_batch_size) for r in runs if r.global_batch_size}),
        time_s=centre_of_times(times), time_ci=median_ci(times), tta_s=centre_of_times(ttas), tta_ci=median_ci(ttas),
        mlperf_score_s=score, mlperf_scaling_factor=factor, mlperf_official_s=official,
        throughput=throughput, per_worker=per_worker,
        steady_throughput=steady, stall_share=stall,
        accuracy=accuracy, accuracy_split=split, accuracy_metric=metric, accuracy_better=better,
        breakdown=_shares(ok, fractions), comm=_comm(workers, ok, fractions), run_ids=sorted(r.id for r in runs),
        energy_j=centre_of_times(joules), energy_ci=median_ci(joules), energy_metric=energy_metric,
        energy_source=energy.source(ok), mean_power_w=med(energy.mean_power_w(r) for r in ok),
        energy_per_sample_j=med(energy.per_sample_j(r) for r in ok),
        tokens_per_s=tokens, tokens_per_worker=tokens_per_worker,
        mfu=flops.mfu_over(ok) if any(flops.audited(r) for r in ok) else None,
    )  # fmt: skip


@dataclass
class SummaryRow:
    """One line of ``honestscale summary``: final runs of one campaign, model, framework and worker count."""

    campaign: str | None
    model: str | None
    dataset: str | None
    framework: str | None
    point: Point
    mode: str | None = None  # the classification of the scaling series these runs belong to (the view's)
    campaigns: tuple[str, ...] = ()  # the campaigns of its runs (several when the view pools them)
    layout: str | None = None  # the parallel layout where it is more than data parallel (``Run.layout_key``)
    split: str | None = None  # its series' split by a label (``Comparison.split``)


def summary(view: View, findings: list[FindingRecord]) -> list[SummaryRow]:
    """Final runs grouped by campaign (``POOLED`` in a pooling view), model, dataset, framework and workers, each
    summarised by :func:`point`, with the rules' verdicts on its runs (``findings``: the lint result about this
    view, as JSON) and its series' mode."""
    groups: dict[tuple[Any, ...], list[Run]] = defaultdict(list)
    for r in view.runs:
        if (r.purpose or "final") == "final" and r.workers:
            groups[(view.group_of(r), r.model, r.dataset, r.framework, r.workers, r.layout_key)].append(r)
    series_of = {tuple(c.key.values()): c for c in view.of_kind("scaling")}
    out = []
    for key, runs in sorted(
        groups.items(),
        key=lambda kv: (
            *tuple((v is None, str(v)) for v in kv[0][:4]),
            kv[0][4],
            (kv[0][5] is not None, kv[0][5] or ""),
        ),
    ):
        mlperf = all(r.source == "mlperf" for r in runs)
        p = point(key[4], runs, view.fractions, mlperf)
        p.lint = lint_codes(findings, set(p.run_ids), "point")
        campaigns = tuple(sorted({r.campaign for r in runs if r.campaign is not None}))
        c = series_of.get((*key[:4], runs[0].layout_family))
        mode, split = (c.mode, c.split) if c else (None, None)
        out.append(SummaryRow(key[0], key[1], key[2], key[3], p, mode, campaigns, key[5], split))
    return out
