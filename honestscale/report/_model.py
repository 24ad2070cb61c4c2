"""The analysis model: every number the report prints, computed once from the store and the lint result.

Statistics follow Hoefler & Belli (SC15): medians with nonparametric (order-statistic) 95 %
confidence intervals across repetitions, harmonic means for rates, speedup and efficiency
against a named base case printed with its absolute time, strong and weak scaling kept apart,
Amdahl (strong) and Gustafson (weak) fits as bounds beside the ideal line, and the MLPerf score
(drop the best and the worst run, mean of the rest, an aborted run counting as infinite).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from statistics import harmonic_mean, median
from typing import Any

import duckdb
import numpy as np
from scipy import optimize, stats

import honestscale
from honestscale.lint import LintResult
from honestscale.lint._view import Comparison, Run, View
from honestscale.store import queries

CI_LEVEL = 0.95
CI_METHOD = "order statistics (binomial), 95 %: the interval between the k-th smallest and k-th largest runs"


def median_ci(values: list[float], level: float = CI_LEVEL) -> tuple[float | None, float | None]:
    """Distribution-free CI of the median: ranks from the binomial(n, 1/2) quantiles; None when n is too small."""
    xs = sorted(values)
    n = len(xs)
    if n == 0:
        return None, None
    alpha = 1 - level
    k = int(stats.binom.ppf(alpha / 2, n, 0.5))  # number of values below the lower bound
    if k < 1 or n - k < k:
        return None, None  # too few runs: no interval reaches the level (see HS202)
    lo, hi = xs[k - 1], xs[n - k]
    coverage = stats.binom.cdf(n - k, n, 0.5) - stats.binom.cdf(k - 1, n, 0.5)
    return (lo, hi) if coverage >= level - 1e-9 else (None, None)


def mlperf_score(times: list[float | None]) -> float | None:
    """MLPerf Training: drop the fastest and the slowest run, mean of the rest; an aborted run counts as infinite."""
    vals = [math.inf if t is None else t for t in times]
    if len(vals) < 3:
        return None
    kept = sorted(vals)[1:-1]
    m = sum(kept) / len(kept)
    return None if math.isinf(m) else m


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
    mlperf_score_s: float | None
    throughput: float | None  # samples/s, harmonic mean over runs
    per_worker: float | None
    accuracy: float | None  # median final accuracy
    accuracy_split: str | None
    breakdown: dict[str, float | None]  # fraction of step time
    speedup: float | None = None
    efficiency: float | None = None
    speedup_ci: tuple[float | None, float | None] = (None, None)


@dataclass
class Fit:
    law: str  # amdahl | gustafson
    parameter: float  # parallel fraction
    stderr: float | None
    formula: str


@dataclass
class FrameworkPoint:
    """One framework of a framework comparison (one worker count), over its repetitions."""

    framework: str
    versions: list[str]
    point: Point
    comm_measured: bool  # False: the framework does not expose its gradient exchange (counted in compute)
    relative_time: float | None = None  # median time to train over the fastest framework's


@dataclass
class ComparisonModel:
    id: str
    kind: str
    label: str
    mode: str | None
    metric: str  # what the speedup is computed on
    base_workers: int | None
    base_time_s: float | None
    points: list[Point]
    fit: Fit | None
    runs: list[str]
    verdicts: list[dict[str, Any]] = field(default_factory=list)  # findings on this comparison
    frameworks: list[FrameworkPoint] = field(default_factory=list)  # kind "framework" only

    @property
    def key_workers(self) -> int | None:
        """The one worker count of a framework comparison."""
        return self.points[0].workers if len(self.points) == 1 else None


@dataclass
class RunRow:
    run_id: str
    name: str | None
    purpose: str | None
    status: str
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
    lint: dict[str, Any]
    reproducibility: dict[str, Any]

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


def _tta(run: Run) -> float | None:
    if run.stop_criterion != "target_accuracy" or run.stop_value is None or run.started_at is None:
        return None
    hits = [e.time for e in run.evals if e.split == "validation" and e.value >= run.stop_value]
    return min(hits) - run.started_at if hits else None


def _point(workers: int, runs: list[Run], steps: dict[str, dict[str, float]], mlperf: bool) -> Point:
    ok = [r for r in runs if r.ok]
    times = [r.time_to_train_s for r in ok if r.time_to_train_s is not None]
    ttas = [t for t in (_tta(r) for r in ok) if t is not None]
    rates = [steps[r.id]["samples_per_s"] for r in ok if r.id in steps and steps[r.id]["samples_per_s"]]
    accs = [r.final_value for r in ok if r.final_value is not None]
    splits = sorted({r.final_split for r in ok if r.final_split})
    fractions: dict[str, float | None] = {}
    for part in ("data", "compute", "comm", "optimizer"):
        vals = [steps[r.id][part] for r in ok if r.id in steps and steps[r.id][part] is not None]
        fractions[part] = median(vals) if vals else None
    throughput = harmonic_mean(rates) if rates else None
    return Point(
        workers=workers, runs=len(runs), succeeded=len(ok),
        global_batch=sorted({int(r.global_batch_size) for r in runs if r.global_batch_size}),
        time_s=median(times) if times else None, time_ci=median_ci(times),
        tta_s=median(ttas) if ttas else None, tta_ci=median_ci(ttas),
        mlperf_score_s=mlperf_score([r.time_to_train_s if r.ok else None for r in runs]) if mlperf else None,
        throughput=throughput, per_worker=throughput / workers if throughput else None,
        accuracy=median(accs) if accs else None, accuracy_split="/".join(splits) or None, breakdown=fractions,
    )  # fmt: skip


def _fit(mode: str | None, points: list[Point], base: int) -> Fit | None:
    data = [(p.workers / base, p.speedup) for p in points if p.speedup is not None]
    if len(data) < 3:  # the base point fits any law: two points leave one to fit one parameter
        return None
    n = np.array([d[0] for d in data], dtype=float)
    s = np.array([d[1] for d in data], dtype=float)
    if mode == "weak":

        def gustafson(x: Any, p: float) -> Any:
            return (1 - p) + p * x

        law, fn, formula = "gustafson", gustafson, "S(N) = (1 - p) + p N"
    else:

        def amdahl(x: Any, p: float) -> Any:
            return 1.0 / ((1 - p) + p / x)

        law, fn, formula = "amdahl", amdahl, "S(N) = 1 / ((1 - p) + p / N)"
    try:
        popt, pcov = optimize.curve_fit(fn, n, s, p0=[0.9], bounds=(0.0, 1.0))
    except (RuntimeError, ValueError):
        return None
    err = float(np.sqrt(pcov[0][0])) if np.all(np.isfinite(pcov)) else None
    return Fit(law, float(popt[0]), err, formula)


def _comparison(
    c: Comparison, steps: dict[str, dict[str, float]], findings: list[dict[str, Any]]
) -> ComparisonModel:
    mlperf = all(r.source == "mlperf" for r in c.runs)
    points = [_point(w, rs, steps, mlperf) for w, rs in c.by_workers().items()]
    base = points[0] if points else None
    metric = "MLPerf score" if mlperf else "median time to train"

    def t(p: Point) -> float | None:
        return p.mlperf_score_s if mlperf else p.time_s

    base_time = t(base) if base else None
    if base is not None and base_time:
        for p in points:
            tp = t(p)
            if tp:
                p.speedup = base_time / tp
                p.efficiency = p.speedup * base.workers / p.workers
                lo_b, hi_b = base.time_ci
                lo_p, hi_p = p.time_ci
                if None not in (lo_b, hi_b, lo_p, hi_p) and not mlperf:
                    p.speedup_ci = (lo_b / hi_p, hi_b / lo_p)  # type: ignore[operator]
    fit = _fit(c.mode, points, base.workers) if base is not None and c.kind == "scaling" else None
    return ComparisonModel(
        id=c.id, kind=c.kind, label=c.label, mode=c.mode, metric=metric,
        base_workers=base.workers if base else None, base_time_s=base_time, points=points, fit=fit,
        runs=sorted(r.id for r in c.runs), verdicts=[f for f in findings if f["comparison"] == c.id],
        frameworks=_frameworks(c, steps) if c.kind == "framework" else [],
    )  # fmt: skip


def _frameworks(c: Comparison, steps: dict[str, dict[str, float]]) -> list[FrameworkPoint]:
    """The frameworks of one framework comparison side by side (same model, dataset and worker count)."""
    groups: dict[str, list[Run]] = defaultdict(list)
    for r in c.runs:
        groups[r.framework or "?"].append(r)
    out = []
    for name, runs in sorted(groups.items()):
        workers = runs[0].workers or 0
        ok = [r for r in runs if r.ok and r.id in steps]
        out.append(
            FrameworkPoint(
                framework=name,
                versions=sorted({r.framework_version for r in runs if r.framework_version}),
                point=_point(workers, runs, steps, mlperf=False),
                comm_measured=bool(ok) and all(steps[r.id].get("comm_measured") for r in ok),
            )
        )
    times = [f.point.time_s for f in out if f.point.time_s]
    for f in out:
        f.relative_time = f.point.time_s / min(times) if times and f.point.time_s else None
    return out


def _steps(con: duckdb.DuckDBPyConnection, campaign: str | None) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for r in queries.run_step_fractions(con, campaign).iter_rows(named=True):
        out[r["run_id"]] = {k: v for k, v in r.items() if k != "run_id"}
    return out


def build(con: duckdb.DuckDBPyConnection, view: View, result: LintResult, campaign: str | None) -> Model:
    steps = _steps(con, campaign)
    findings = [f.as_json() for f in result.findings]
    comps = [
        _comparison(c, steps, findings)
        for c in view.comparisons
        if c.kind in ("scaling", "config", "framework", "hardware")
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
        )
        for r in sorted(view.runs, key=lambda r: (r.campaign or "", r.purpose or "", r.workers or 0, r.id))
    ]
    by_purpose: dict[str, dict[str, float]] = defaultdict(
        lambda: {"runs": 0, "hours": 0.0, "accelerator_hours": 0.0}
    )
    for r in view.runs:
        key = (r.purpose or "final") if r.ok else f"{r.purpose or 'final'} ({r.status})"
        by_purpose[key]["runs"] += 1
        by_purpose[key]["hours"] += (r.time_to_train_s or 0.0) / 3600
        by_purpose[key]["accelerator_hours"] += r.accelerator_hours() or 0.0
    setups: dict[tuple[Any, ...], dict[str, Any]] = {}
    for r in view.runs:
        key = (
            r.system,
            r.accelerator,
            r.n_nodes,
            r.accelerators_per_node,
            r.cpu,
            r.framework,
            r.framework_version,
        )
        entry = setups.setdefault(key, {
            "system": r.system, "nodes": r.n_nodes, "accelerators_per_node": r.accelerators_per_node,
            "accelerator": r.accelerator, "cpu": r.cpu, "interconnect": r.interconnect, "framework": r.framework,
            "framework_version": r.framework_version, "software": r.attrs.get("software") or {}, "runs": 0,
        })  # fmt: skip
        entry["runs"] += 1
    verdicts = [
        {"code": v.code, "name": v.name, "severity": v.severity, "outcome": v.outcome, "pass": v.passed,
         "fail": v.failed, "cannot_verify": v.cannot_verify, "suppressed": v.suppressed,
         "justification": next((s.reason for s in result.suppressions if s.code == v.code), None)}
        for v in result.verdicts
    ]  # fmt: skip
    scaling = [c for c in comps if c.kind == "scaling"]
    title = f"Scaling report: {campaign}" if campaign else "Scaling report"
    return Model(
        title=title,
        campaign=campaign,
        generated_by=f"honestscale {honestscale.__version__}",
        ci_method=CI_METHOD,
        comparisons=scaling + [c for c in comps if c.kind != "scaling"],
        runs=rows,
        totals={
            "runs": len(view.runs),
            "by_purpose": dict(by_purpose),
            "hours": sum(v["hours"] for v in by_purpose.values()),
            "accelerator_hours": sum(v["accelerator_hours"] for v in by_purpose.values()),
        },
        setup=list(setups.values()),
        lint={"verdicts": verdicts, "findings": findings, "errors": len(result.errors)},
        reproducibility={
            "honestscale": honestscale.__version__,
            "duckdb": duckdb.__version__,
            "config_hashes": sorted({r.config_hash for r in view.runs if r.config_hash}),
            "git_commits": sorted({r.git_commit for r in view.runs if r.git_commit}),
            "commands": sorted(
                {
                    " ".join(map(str, r.attrs.get("command") or []))
                    for r in view.runs
                    if r.attrs.get("command")
                }
            )[:50],
            "sources": sorted({str(r.source_file) for r in view.runs if r.source_file})[:200],
        },
    )
