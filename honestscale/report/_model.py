"""The analysis model: every number the report prints, computed once from the store and the lint result.

Statistics follow Hoefler & Belli (SC15): medians with nonparametric (order-statistic) 95 %
confidence intervals across repetitions, harmonic means for rates, speedup and efficiency
against a named base case printed with its absolute time, strong and weak scaling kept apart,
Amdahl (strong) and Gustafson (weak) fits as bounds beside the ideal line, and the MLPerf score
(drop the best and the worst run, mean of the rest, an aborted run counting as infinite).
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypedDict

import honestscale
from honestscale.analysis import compare, efficiency, energy, forecast, laws, ranks, repetitions, stats
from honestscale.analysis.efficiency import Factors
from honestscale.analysis.laws import LawFit
from honestscale.analysis.points import FindingRecord, Findings, Point, energies, lint_codes, point
from honestscale.analysis.prediction import Prediction
from honestscale.analysis.scaling import TTA, scaled, time_metric
from honestscale.analysis.stats import CI_METHOD, RATIO_METHOD, Estimate, median_ci, mlperf_score
from honestscale.display import shown_command, shown_path
from honestscale.lint import LintResult
from honestscale.report import _layouts
from honestscale.report._frameworks import FrameworkPoint, side_by_side
from honestscale.store import DUCKDB_VERSION
from honestscale.view import Comparison, Run, StepFractions, View

__all__ = ["CI_METHOD", "Model", "Point", "build", "median_ci", "mlperf_score"]


@dataclass
class Fit:
    law: str  # amdahl | gustafson
    parameter: float  # parallel fraction
    stderr: float | None
    formula: str
    quantity: str = (
        ""  # what it is fitted to: the speedup of a time (Amdahl) or the scaled speedup (Gustafson)
    )
    fitted: bool = (
        True  # False: the fraction two worker counts imply (laws.NOT_FITTED), no error, no projection
    )
    not_fitted: str = laws.NOT_FITTED


@dataclass
class ComparisonModel:
    id: str
    kind: str
    label: str
    mode: str | None  # the view's kind: strong | weak | time_to_solution | mixed (what it means: mode_note)
    metric: str  # what the speedup is computed on
    base_workers: int | None
    base_time_s: float | None
    points: list[Point]
    fit: Fit | None
    runs: list[str]
    verdicts: list[FindingRecord] = field(default_factory=list)  # findings on this comparison
    frameworks: list[FrameworkPoint] = field(default_factory=list)  # kind "framework" only
    layouts: _layouts.Layouts | None = None  # kind "layout" only: one row per layout (report._layouts)
    mode_note: str = ""
    lint: dict[str, list[str]] = field(default_factory=dict)  # codes failing / unverifiable on these runs
    not_comparable: list[dict[str, str]] = field(default_factory=list)  # framework runs left out, and why
    factors: list[Factors] = field(default_factory=list)  # scaling: time per sample x samples to target
    orderings: list[dict[str, Any]] = field(default_factory=list)  # each ordering with its test (SC15 rule 7)
    ranks: dict[str, Any] = field(default_factory=dict)  # ranks of these runs (SC15 rule 10)
    repetitions: list[dict[str, Any]] = field(
        default_factory=list
    )  # until_ci: how many runs each point needed
    law_withheld: str | None = None  # scaling: why no law is drawn (analysis.laws)
    # scaling: each measure at twice the largest worker count (analysis.forecast), and the measures refused, why
    predictions: list[Prediction] = field(default_factory=list)
    prediction_refused: dict[str, str] = field(default_factory=dict)
    prediction_checks: list[str] = field(default_factory=list)  # the largest count held back and predicted
    hardware_note: str | None = None  # scaling: its points ran on different accelerator models
    split_note: str | None = None  # scaling: the label that parts its points from others of its kind (view)
    key: dict[str, Any] = field(default_factory=dict)  # what selects its runs (the view's comparison key)

    @property
    def key_workers(self) -> int | None:
        """The one worker count of a framework comparison."""
        return self.points[0].workers if len(self.points) == 1 else None


@dataclass
class RunRow:
    run_id: str
    name: str | None
    purpose: str | None
    status: str | None
    workers: int | None
    accelerator: str | None
    global_batch: int | None
    time_s: float | None
    accelerator_hours: float | None
    accuracy: float | None
    split: str | None
    config_hash: str | None
    framework: str | None
    campaign: str | None
    energy_j: float | None = None  # energy to train, where measured
    node_hours: float | None = None  # CPU-only runs: what they spent instead of accelerator-hours
    core_hours: float | None = None
    metric: str | None = None  # what the final quality measures (accuracy, loss, ...)


@dataclass(frozen=True)
class ClaimRow:
    """A claim of the paper with its verdict (``honestscale.claims``), as the report's Claims section prints it."""

    id: str
    says: str
    verdict: str  # supported | contradicted | not quotable | cannot verify
    reason: str
    number: str  # the store's number with its statistic, interval and n, or "–"
    rules: dict[str, list[str]]  # the rules' verdicts on its runs


# one rule's tally over the report's runs (``pass`` is a keyword: the functional form)
RuleVerdict = TypedDict(
    "RuleVerdict",
    {
        "code": str,
        "name": str,
        "severity": str,
        "outcome": str,
        "pass": int,
        "fail": int,
        "cannot_verify": int,
        "suppressed": int,
        "justification": str | None,
    },
)


class LintSummary(TypedDict):
    """The lint of the report's runs: every rule's tally, every finding, and how many rules failed to run."""

    verdicts: list[RuleVerdict]
    findings: list[FindingRecord]
    errors: int


@dataclass
class Model:
    title: str
    campaign: str | None
    generated_by: str
    ci_method: str
    comparisons: list[ComparisonModel]
    runs: list[RunRow]
    totals: dict[str, Any]
    setup: list[dict[str, Any]]
    lint: LintSummary
    reproducibility: dict[str, Any]
    statistics: dict[str, str] = field(default_factory=dict)  # which statistic each number is
    claims: list[ClaimRow] = field(default_factory=list)  # a paper's claims judged (report --claims)
    claims_file: str | None = None

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = _clean(asdict(self))
        return out


def _clean(obj: Any) -> Any:
    if isinstance(obj, float):
        return None if math.isnan(obj) or math.isinf(obj) else round(obj, 6)
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_clean(v) for v in obj]
    return obj


def _ci(e: Estimate | None) -> tuple[float | None, float | None]:
    return (None, None) if e is None else (e.low, e.high)


def _speedups(c: Comparison, points: list[Point], mlperf: bool) -> None:
    """Speedup and efficiency of every point over the base, with the intervals of the ratios."""
    if not points:
        return
    base = points[0]
    base.speedup = base.efficiency = base.throughput_speedup = base.throughput_efficiency = 1.0
    by = {s.workers: s for s in scaled(c.by_workers())}
    for p in points[1:]:
        s = by.get(p.workers)
        if s is None:
            continue
        if mlperf:  # the official scores' ratio: each olympic mean times its scaling.json factor, as scored
            b, q = base.mlperf_scored_s, p.mlperf_scored_s
            t = Estimate(b / q) if b and q else None
        else:
            t = s.time_speedup if c.mode != "weak" else None
        if t is not None:
            p.speedup, p.speedup_ci = t.value, _ci(t)
            e = s.efficiency(t)
            assert e is not None
            p.efficiency, p.efficiency_ci = e.value, _ci(e)
        if s.throughput_speedup is not None:
            p.throughput_speedup, p.throughput_speedup_ci = (
                s.throughput_speedup.value,
                _ci(s.throughput_speedup),
            )
            e = s.throughput_efficiency
            assert e is not None
            p.throughput_efficiency, p.throughput_efficiency_ci = e.value, _ci(e)
    by_workers = c.by_workers()
    _, base_joules = energies(by_workers[base.workers])
    for p in points:
        got = stats.ratio(base_joules, energies(by_workers[p.workers])[1], "median")
        if got is not None and p is base:
            got = Estimate(1.0)  # the base case against itself: 1 by definition, no interval
        if got is not None:
            p.energy_efficiency, p.energy_efficiency_ci = got.value, _ci(got)
    if all(p.throughput_speedup in (None, 1.0) for p in points[1:]):
        base.throughput_speedup = base.throughput_efficiency = None
    if all(p.speedup is None for p in points[1:]):
        base.speedup = base.efficiency = None


def _fitted_law(c: Comparison) -> tuple[Fit | None, str | None]:
    """The law of the series (``analysis.laws``: the advisor's), drawn only where it describes the points; else
    why not."""
    got: LawFit = laws.fit(c, bootstrap=0)
    if got.law is None or got.parallel_fraction is None or got.withheld is not None:
        return None, got.withheld
    return Fit(got.law, got.parallel_fraction, got.stderr, got.formula, got.quantity, got.fitted), None


def _repetitions(c: Comparison, specs: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Where the campaign asked for repetitions until the interval is narrow: what each point got."""
    asked = repetitions.of_spec(specs.get(c.key.get("campaign") or "", {}))
    if asked is None or c.kind != "scaling":
        return []
    out = []
    for w, runs in c.by_workers().items():
        got = repetitions.precision(runs, *asked)
        out.append({"workers": w, "runs": got.runs, "met": got.met, "capped": got.capped, "reach": got.reach,
                    "fraction": got.fraction, "cap": got.cap, "text": got.describe()})  # fmt: skip
    return out


def _points(
    c: Comparison, fractions: dict[str, StepFractions], findings: Findings, mlperf: bool
) -> list[Point]:
    """The comparison's points, each with the rules' verdicts beside its own numbers and beside its ratios."""
    points = [point(w, rs, fractions, mlperf) for w, rs in c.by_workers().items()]
    for p in points:
        p.lint = lint_codes(
            findings, set(p.run_ids), "point"
        )  # a rule about the series marks no point's number
        # a speedup is a ratio over the base case: the rules about both sets of runs and the series go beside it
        p.ratio_lint = lint_codes(findings, set(p.run_ids) | set(points[0].run_ids), "ratio")
        p.rate_ratio_lint = lint_codes(findings, set(p.run_ids) | set(points[0].run_ids), "rate_ratio")
    return points


def _metric(c: Comparison, points: list[Point], mlperf: bool) -> tuple[str, float | None]:
    """What the speedups are computed on (the speedups set on the points of a series), and the base case's time."""
    scaled = mlperf and any(p.mlperf_scaling_factor not in (None, 1.0) for p in points)
    metric = "MLPerf official score (olympic mean x scaling.json)" if scaled else "MLPerf olympic mean"
    metric = metric if mlperf else "median time to train"
    if c.kind == "scaling":
        if not mlperf:
            metric = f"median {time_metric(c.by_workers())}"
        _speedups(c, points, mlperf)
    if not points:
        return metric, None
    base = points[0]
    return metric, base.mlperf_scored_s if mlperf else (
        base.tta_s if metric == f"median {TTA}" else base.time_s
    )


def _comparison(
    c: Comparison,
    fractions: dict[str, StepFractions],
    findings: Findings,
    spreads: dict[str, ranks.RunRanks],
    specs: dict[str, dict[str, Any]],
    forecasts: bool = True,
) -> ComparisonModel:
    if c.kind == "layout":  # one row per layout, never one point pooling them (report._layouts)
        lay = _layouts.side_by_side(c, fractions, findings)
        return ComparisonModel(
            id=c.id, kind=c.kind, label=c.label, mode=None, metric=f"median {lay.metric}", base_workers=None,
            base_time_s=None, points=[], fit=None, runs=sorted(r.id for r in c.runs),
            verdicts=findings.about_comparison(c.id), lint=lint_codes(findings, {r.id for r in c.runs}),
            layouts=lay, orderings=lay.orderings,
        )  # fmt: skip
    mlperf = all(r.source == "mlperf" for r in c.runs)
    points = _points(c, fractions, findings, mlperf)
    note = c.classification.sentence if c.classification else ""
    base = points[0] if points else None
    metric, base_time = _metric(c, points, mlperf)
    fit, withheld = _fitted_law(c) if base is not None and c.kind == "scaling" else (None, None)
    frameworks = side_by_side(c, fractions, findings) if c.kind == "framework" else []
    if c.kind == "scaling":
        orderings = compare.scaling(c.by_workers())
    else:  # the frameworks of the like-for-like setup (the view's), as in the table and as HS212 judges them
        orderings = compare.frameworks(compare.framework_groups(c.runs))
    scaling = c.kind == "scaling" and forecasts
    ahead = forecast.predicted(forecast.series(c, fractions, findings)) if scaling else None
    return ComparisonModel(
        id=c.id, kind=c.kind, label=c.label, mode=c.mode, metric=metric,
        base_workers=base.workers if base else None, base_time_s=base_time, points=points, fit=fit,
        runs=sorted(r.id for r in c.runs), verdicts=findings.about_comparison(c.id),
        frameworks=frameworks, mode_note=note,
        lint=lint_codes(findings, {r.id for r in c.runs}), not_comparable=c.left_out,
        law_withheld=withheld, hardware_note=c.hardware_note, split_note=c.split, key=dict(c.key),
        factors=efficiency.factors(c.by_workers()) if c.kind == "scaling" else [],
        orderings=[o.as_json() for o in orderings], ranks=ranks.summarise([r.id for r in c.runs], spreads),
        repetitions=_repetitions(c, specs),
        predictions=ahead.predictions if ahead else [], prediction_refused=ahead.refused if ahead else {},
        prediction_checks=forecast.check_lines(ahead) if ahead else [],
    )  # fmt: skip


def _commands(runs: list[Run], root: Path | None) -> list[dict[str, Any]]:
    """The distinct commands, each once: what differs per repetition (seed, run id) shown as a placeholder; the
    interpreter as ``python`` and paths relative to ``root`` (``display.shown_command``: no machine's paths)."""
    counts: dict[str, int] = defaultdict(int)
    for r in runs:
        argv = r.command
        if argv:
            text = shown_command(argv, root)
            text = re.sub(r"--seed \S+", "--seed <seed>", text)
            counts[re.sub(r"--run-id \S+", "--run-id <run id>", text)] += 1
    return [{"command": k, "runs": v} for k, v in sorted(counts.items())][:50]


def totals(runs: list[Run]) -> dict[str, Any]:
    """What the runs cost, in the unit that was spent: accelerator-hours where there are accelerators, node-hours
    and core-hours (where the cores were recorded) for CPU-only runs; measured energy, and how many runs measured
    it; per purpose and status, and in all."""
    by_purpose: dict[str, dict[str, float]] = defaultdict(
        lambda: {
            "runs": 0,
            "hours": 0.0,
            "accelerator_hours": 0.0,
            "node_hours": 0.0,
            "core_hours": 0.0,
            "kwh": 0.0,
            "energy_runs": 0,
            "cpu_only_runs": 0,
        }
    )
    for r in runs:
        key = (r.purpose or "final") if r.ok else f"{r.purpose or 'final'} ({r.status})"
        by_purpose[key]["runs"] += 1
        by_purpose[key]["hours"] += (r.time_to_train_s or 0.0) / 3600
        by_purpose[key]["accelerator_hours"] += r.accelerator_hours() or 0.0
        if r.cpu_only:  # no accelerator spent: counted in nodes (and cores, where recorded)
            by_purpose[key]["cpu_only_runs"] += 1
            by_purpose[key]["node_hours"] += r.node_hours() or 0.0
            by_purpose[key]["core_hours"] += r.core_hours() or 0.0
        spent = energy.to_train(r)
        if spent is not None:
            by_purpose[key]["kwh"] += spent.joules / 3.6e6
            by_purpose[key]["energy_runs"] += 1
    return {
        "runs": len(runs),
        "by_purpose": dict(by_purpose),
        "hours": sum(v["hours"] for v in by_purpose.values()),
        "accelerator_hours": sum(v["accelerator_hours"] for v in by_purpose.values()),
        "cpu_only_runs": int(sum(v["cpu_only_runs"] for v in by_purpose.values())),
        "node_hours": sum(v["node_hours"] for v in by_purpose.values()),
        "core_hours": sum(v["core_hours"] for v in by_purpose.values()),
        "kwh": sum(v["kwh"] for v in by_purpose.values()),
        "energy_runs": int(sum(v["energy_runs"] for v in by_purpose.values())),
    }


def _pythons(runs: list[Run]) -> list[str]:
    """The Python versions the runs recorded (run_start's software), as ``Python 3.11.7``."""
    got = {str(v) for r in runs if (v := r.software_stack.get("python"))}
    return [f"Python {v}" for v in sorted(got)]


def build(
    view: View,
    result: LintResult,
    campaign: str | None,
    path_root: Path | None = None,
    forecasts: bool = True,
) -> Model:
    """The model of the view; ``path_root``: the folder the event files and command lines are shown relative to
    (the store's, or ``--path-root``; None: only their last parts), as published reports show them; ``forecasts``:
    each series' predictions at larger counts and their checks (False: a claim's context, which quotes none)."""
    steps = view.fractions
    spreads = ranks.of_runs({r.id: view.rank_times[r.id] for r in view.runs if r.id in view.rank_times})
    findings = Findings(f.as_json() for f in result.findings)
    comps = [
        _comparison(c, steps, findings, spreads, view.campaigns, forecasts)
        for c in view.comparisons
        if c.kind in ("scaling", "config", "framework", "layout", "hardware")
    ]
    rows = [
        RunRow(
            r.id,
            r.name,
            r.purpose,
            r.status,
            r.workers,
            r.accelerator,
            r.global_batch_size,
            r.time_to_train_s,
            r.accelerator_hours(),
            r.final_value,
            r.final_split,
            r.config_hash,
            r.framework,
            r.campaign,
            spent.joules if (spent := energy.to_train(r)) is not None else None,
            r.node_hours() if r.cpu_only else None,
            r.core_hours() if r.cpu_only else None,
            r.final_metric,
        )
        for r in sorted(view.runs, key=lambda r: (r.campaign or "", r.purpose or "", r.workers or 0, r.id))
    ]
    setups: dict[tuple[Any, ...], dict[str, Any]] = {}
    for r in view.runs:
        setup = (
            r.system,
            r.accelerator,
            r.n_nodes,
            r.accelerators_per_node,
            r.cpu,
            r.framework,
            r.framework_version,
        )
        entry = setups.setdefault(setup, {
            "system": r.system, "nodes": r.n_nodes, "accelerators_per_node": r.accelerators_per_node,
            "accelerator": r.accelerator, "cpu": r.cpu, "interconnect": r.interconnect, "framework": r.framework,
            "framework_version": r.framework_version, "software": dict(r.software_stack), "runs": 0,
        })  # fmt: skip
        entry["runs"] += 1
    verdicts: list[RuleVerdict] = [
        {"code": v.code, "name": v.name, "severity": v.severity, "outcome": v.outcome, "pass": v.passed,
         "fail": v.failed, "cannot_verify": v.cannot_verify, "suppressed": v.suppressed,
         # only the reasons that silenced a finding of this report: never another campaign's
         "justification": "; ".join(sorted({f.suppressed for f in result.findings
                                            if f.code == v.code and f.suppressed})) or None}
        for v in result.verdicts
    ]  # fmt: skip
    scaling = [c for c in comps if c.kind == "scaling"]
    title = f"Scaling report: {campaign}" if campaign else "Scaling report"
    return Model(
        title=title,
        campaign=campaign,
        generated_by=f"honestscale {honestscale.__version__}",
        ci_method=CI_METHOD,
        statistics={
            "time": stats.TIME_STATISTIC,
            "throughput": stats.RATE_STATISTIC,
            "time_ci": CI_METHOD,
            "ratio_ci": RATIO_METHOD,
            "comparison": stats.DECISION_RULE,
            "ranks": f"{ranks.SUMMARY}; whether ranks differ: {ranks.TEST}",
            "energy": "accelerators' energy from the NVML energy counter, interpolated to run_start and the "
            "evaluation that reached the target (power x time where only power was read; MLPerf power logs where "
            "a submission has them); median of runs, with its 95 % interval",
        },
        comparisons=scaling + [c for c in comps if c.kind != "scaling"],
        runs=rows,
        totals=totals(view.runs),
        setup=list(setups.values()),
        lint={"verdicts": verdicts, "findings": findings, "errors": len(result.errors)},
        reproducibility={
            "honestscale": honestscale.__version__,
            "duckdb": DUCKDB_VERSION,
            "config_hashes": sorted({r.config_hash for r in view.runs if r.config_hash}),
            "git_commits": sorted({r.git_commit for r in view.runs if r.git_commit}),
            "python": _pythons(view.runs),
            "commands": _commands(view.runs, path_root),
            # relative to the store's folder (or --path-root): the full paths stay in the store (`show RUN`)
            "sources": sorted({shown_path(r.source_file, path_root) for r in view.runs if r.source_file})[
                :200
            ],
        },
    )
