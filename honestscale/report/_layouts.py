"""A layout comparison: one model's runs at one worker count under two or more parallel layouts, side by side.

One row per layout (``Run.layout``, and for a pipeline its schedule, microbatches and virtual stages: another
schedule is another configuration). Every number says which statistic it is: times are the median of runs with
their order-statistic 95 % interval (none below ``stats.MIN_INTERVAL_RUNS`` runs), tokens/s the harmonic mean of
runs, step shares the median of runs (``analysis.points.point``), MFU the median of runs with its interval
(``analysis.flops``). A layout is called faster than another only by ``stats.DECISION_RULE``
(``compare.Ordering``). The pipeline bubble is analytic, (pp - 1) / (v·m + pp - 1) with m microbatches and v virtual
stages per rank (v = 1 for GPipe and 1F1B), printed beside the measured comm share, never in its place.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from statistics import median
from typing import Any

from honestscale import catalogue
from honestscale.analysis import compare, flops
from honestscale.analysis.points import DO_NOT_QUOTE, FindingRecord, Point, lint_codes, point, verdicts_text
from honestscale.analysis.scaling import TTA, time_metric, times
from honestscale.analysis.stats import centre_of_times, median_ci
from honestscale.report._units import unit_for
from honestscale.view import Comparison, Run, StepFractions

# what a step's comm time holds for each dimension named in ``comm_dimensions`` (docs/events.md), and what a
# dimension's collectives are where the runner counts them inside compute
COLLECTIVES = {
    "dp": "dp all-reduce",
    "fsdp": "fsdp all-gather/reduce-scatter",
    "tp": "tp all-reduce",
    "pp": "pp send/recv + bubble",
    "cp": "cp ring exchange",
    "ep": "ep all-to-all",
}


@dataclass
class Pipeline:
    """A pipeline layout's schedule and its analytic bubble (None where the schedule has no formula here)."""

    stages: int  # pp degree
    schedule: str | None
    microbatches: int | None
    virtual_stages: int | None
    bubble: float | None  # analytic
    why_none: str = ""  # why no analytic bubble


@dataclass
class LayoutRow:
    """One layout of a layout comparison, over its repetitions."""

    layout: str  # as --parallel names it: dp2, tp2, dp2,pp2 (and the pipeline's schedule)
    degrees: dict[str, int]
    point: Point  # runs, shares (median of runs), tokens/s (harmonic mean of runs), lint on exactly its runs
    time_s: float | None  # median of the comparison's time metric
    time_ci: tuple[float | None, float | None]
    time_to_train_s: float | None  # median time to train
    relative_time: float | None = None  # median time over the fastest layout's median
    relative_ci: tuple[float | None, float | None] = (None, None)  # the ratio's bootstrap interval
    comm_holds: list[str] = field(default_factory=list)  # what the measured comm share holds
    inside_compute: list[str] = field(default_factory=list)  # collectives counted inside compute
    mfu: float | None = None  # median of runs
    mfu_ci: tuple[float | None, float | None] = (None, None)
    mfu_runs: int = 0
    mfu_missing: str = ""  # why no MFU: the peak, or the counts
    mfu_record: str = ""  # what to record for one
    mfu_flag: str = ""  # "do not quote" where HS107 fails as an error on the runs (an MFU over 100 %)
    tflops_per_worker: float | None = None  # model FLOPs achieved per accelerator, median of runs
    pipeline: Pipeline | None = None


@dataclass
class Layouts:
    """The layouts of one comparison, the time metric they are compared on, and the orderings the rule allows."""

    rows: list[LayoutRow]
    metric: str  # time to accuracy (every successful run reached its target) | time to train
    unit: tuple[str, float]
    fastest: str | None  # the layout with the lowest median
    orderings: list[dict[str, Any]]  # each other layout against the fastest (compare.Ordering.as_json)
    fastest_shown: bool  # every other layout differs from the fastest by the decision rule
    convention: str = flops.DEFAULT_CONVENTION
    target: str = ""  # what the runs train to: ``loss ≤ 2.9``
    not_like_for_like: list[str] = field(default_factory=list)  # what differs between the layouts' setups


def bubble(stages: int, microbatches: int | None, schedule: str | None, virtual: int | None) -> Pipeline:
    """The analytic bubble of a pipeline of ``stages`` stages (GPipe, 1F1B; interleaved with ``virtual``
    stages per rank); None, with why, where a count is missing or the schedule has no formula here."""
    s = (schedule or "").lower().replace("_", "-")
    p = Pipeline(stages, schedule, microbatches, virtual, None)
    if not microbatches:
        p.why_none = "microbatches not recorded"
    elif "interleav" in s:
        if virtual:
            p.bubble = (stages - 1) / (virtual * microbatches + stages - 1)
        else:
            p.why_none = "virtual stages not recorded"
    elif s in ("gpipe", "1f1b"):
        p.bubble = (stages - 1) / (microbatches + stages - 1)
    else:
        p.why_none = (
            f"no analytic formula here for the schedule {schedule!r}" if schedule else "schedule not recorded"
        )
    return p


def _comm(runs: Sequence[Run], degrees: dict[str, int]) -> tuple[list[str], list[str]]:
    """What the comm share holds (``comm_dimensions``) and which collectives are counted inside compute."""
    named = [r.comm_dimensions for r in runs]
    if not named or any(n is None for n in named):
        return ["not recorded which"], []
    held = {d for n in named for d in n or ()}
    active = [d for d, v in degrees.items() if v > 1]
    holds = [COLLECTIVES.get(d, d) for d in COLLECTIVES if d in held]
    inside = [COLLECTIVES[d] for d in COLLECTIVES if d in active and d not in held]
    return holds, inside


def _mfu(row: LayoutRow, runs: Sequence[Run], convention: str) -> None:
    got = [flops.utilisation(r, convention) for r in runs if r.ok]
    vals = [u.mfu for u in got if u.mfu is not None]
    tf = [u.tflops_per_accelerator for u in got if u.tflops_per_accelerator is not None]
    row.tflops_per_worker = median(tf) if tf else None
    if vals:
        row.mfu, row.mfu_ci, row.mfu_runs = median(vals), median_ci(vals), len(vals)
        if len(vals) < len(got):
            row.mfu_missing = f"{len(got) - len(vals)} of {len(got)} runs without MFU"
        return
    missing = sorted({u.peak.missing or "FLOPs or tokens not recorded: " + ", ".join(u.missing) for u in got})
    row.mfu_missing = "; ".join(missing) or "no successful run"
    row.mfu_record = "; ".join(sorted({u.peak.record for u in got if u.peak.missing and u.peak.record}))


SETUP = (
    ("global_batch_size", "global batch"),
    ("sequence_length", "sequence length"),
    ("global_batch_tokens", "tokens per step"),
    ("accelerator", "accelerator"),
    ("precision", "precision"),
)


def _setups(groups: dict[str, list[Run]]) -> list[str]:
    """What differs between the layouts' setups beyond the layout: each as ``global batch 32 (dp2), 64 (tp2)``."""
    out = []
    for attr, name in SETUP:
        seen = {k: sorted({str(r.value(attr)) for r in runs}) for k, runs in groups.items()}
        if len({v for vs in seen.values() for v in vs}) > 1:
            out.append(f"{name} " + ", ".join(f"{'/'.join(v)} ({k})" for k, v in seen.items()))
    return out


def _target(runs: Sequence[Run]) -> str:
    """The target the runs train to, with its direction (``loss ≤ 2.9``); "" where they name none or several."""
    got = {(r.target_metric, r.stop_value) for r in runs if r.stop_criterion == "target_accuracy"}
    if len(got) != 1:
        return ""
    ((metric, value),) = got
    if metric is None or value is None:
        return ""
    return f"{metric} {'≤' if catalogue.direction(metric) == 'lower' else '≥'} {float(value):g}"


def side_by_side(
    c: Comparison, fractions: dict[str, StepFractions], findings: list[FindingRecord]
) -> Layouts:
    """The layouts of a layout comparison, side by side, with each layout against the fastest."""
    groups = compare.layout_groups(c.runs)
    ok = [r for runs in groups.values() for r in runs if r.ok]
    metric = time_metric(groups)
    conv = flops.DEFAULT_CONVENTION
    rows = []
    for name, runs in sorted(groups.items(), key=lambda kv: (kv[1][0].layout_key is not None, kv[0])):
        p = point(runs[0].workers or 0, runs, fractions, mlperf=False)
        p.lint = lint_codes(findings, set(p.run_ids))
        t = times(runs, metric)
        row = LayoutRow(name, runs[0].degrees, p, centre_of_times(t), median_ci(t), p.time_s)
        row.comm_holds, row.inside_compute = _comm(runs, row.degrees)
        _mfu(row, runs, conv)
        row.mfu_flag = DO_NOT_QUOTE if "HS107" in (p.lint or {}).get("error", []) else ""
        if row.degrees["pp"] > 1:
            v = runs[0].pipeline_virtual_stages
            row.pipeline = bubble(
                row.degrees["pp"],
                runs[0].microbatches,
                runs[0].pipeline_schedule,
                v if isinstance(v, int) else None,
            )
        rows.append(row)
    orderings = compare.layouts(groups)  # each layout against the fastest, as HS212 judges them
    fastest = orderings[0].b if orderings else None
    for row in rows:
        if row.layout == fastest:
            row.relative_time = 1.0  # the fastest against itself: 1 by definition, no interval
    for o in orderings:
        row = next(r for r in rows if r.layout == o.a)
        est = o.difference.ratio
        if est is not None:
            row.relative_time, row.relative_ci = est.value, (est.low, est.high)
    unit = unit_for([t for r in rows for t in (r.time_s, r.time_to_train_s, *r.time_ci)])
    # each ordering with the rules about the runs of both its sides
    said = [o.as_json() | {"lint": lint_codes(findings, {r.id for r in o.runs})} for o in orderings]
    return Layouts(
        rows,
        metric,
        unit,
        fastest,
        said,
        bool(orderings) and all(o.difference.significant for o in orderings),
        conv,
        _target(ok),
        _setups(groups),
    )


def _g(v: float | None, digits: int = 4) -> str:
    return "" if v is None else f"{v:.{digits}g}"


def _share(v: float | None) -> str:
    return "–" if v is None else f"{100 * v:.0f} %"


def _comm_cell(row: LayoutRow) -> str:
    """The comm share where it was measured; else where the collectives are (inside compute) or why not."""
    if row.point.comm == "measured":
        return _share(row.point.breakdown.get("comm"))
    return "in compute" if row.inside_compute and not row.comm_holds else row.point.comm


def _holds(row: LayoutRow) -> str:
    parts = [*row.comm_holds]
    if row.inside_compute:
        parts.append("inside compute: " + ", ".join(row.inside_compute))
    return "; ".join(parts) or "–"


def _mfu_cell(row: LayoutRow) -> str:
    if row.mfu is None:
        return "cannot verify"
    lo, hi = row.mfu_ci
    ci = f" [{100 * lo:.1f}, {100 * hi:.1f}]" if lo is not None and hi is not None else " (no interval)"
    return f"{100 * row.mfu:.1f} %{ci}" + (f" — {row.mfu_flag}" if row.mfu_flag else "")


def tables(lay: Layouts) -> list[tuple[str, list[str], list[list[str]]]]:
    """A layout comparison for a paper (LaTeX): times, rates, the step, the pipelines (at most 6 columns each)."""
    unit, div = lay.unit
    what = "time to target" if lay.metric == TTA else "time to train"

    def t(v: float | None) -> str:
        return "–" if v is None else f"{v / div:.3g}"

    def ci(c: tuple[float | None, float | None]) -> str:
        return "" if c[0] is None or c[1] is None else f"{t(c[0])}–{t(c[1])}"

    times_ = [
        [
            r.layout,
            f"{r.point.succeeded}/{r.point.runs}",
            t(r.time_s),
            ci(r.time_ci),
            _g(r.relative_time, 3)
            + (
                f" [{_g(r.relative_ci[0], 3)}, {_g(r.relative_ci[1], 3)}]"
                if r.relative_ci[0] is not None
                else ""
            ),
            verdicts_text(r.point.lint),
        ]
        for r in lay.rows
    ]
    rates = [
        [
            r.layout,
            _g(r.point.tokens_per_s),
            _g(r.point.tokens_per_worker),
            _g(r.tflops_per_worker, 3),
            _mfu_cell(r),
        ]
        for r in lay.rows
    ]
    step = [
        [
            r.layout,
            _share(r.point.breakdown.get("data")),
            _share(r.point.breakdown.get("compute")),
            _comm_cell(r),
            _share(r.point.breakdown.get("optimizer")),
            _holds(r),
        ]
        for r in lay.rows
    ]
    out = [
        (
            "times",
            [
                "layout",
                "runs ok",
                f"{what} [{unit}], median",
                f"95 % CI [{unit}]",
                "relative [95 % CI]",
                "rules failing",
            ],
            times_,
        ),
        (
            "rates",
            [
                "layout",
                "tokens/s (harmonic mean)",
                "per worker",
                f"model TFLOP/s per worker ({lay.convention})",
                "MFU [95 % CI]",
            ],
            rates,
        ),
        ("step", ["layout", "data", "compute", "comm", "optimizer", "comm holds"], step),
    ]
    pipes = [r for r in lay.rows if r.pipeline is not None]
    if pipes:
        out.append(
            (
                "pipeline",
                [
                    "layout",
                    "schedule",
                    "microbatches",
                    "virtual stages",
                    "bubble (analytic)",
                    "comm share (measured)",
                ],
                [
                    [
                        r.layout,
                        r.pipeline.schedule or "–",
                        str(r.pipeline.microbatches or "–"),
                        str(r.pipeline.virtual_stages or "–"),
                        _share(r.pipeline.bubble) if r.pipeline.bubble is not None else r.pipeline.why_none,
                        _comm_cell(r),
                    ]
                    for r in pipes
                    if r.pipeline is not None
                ],
            )
        )
    return out


def values(lay: Layouts) -> list[tuple[str, list[str], list[list[str]]]]:
    """The same as values (CSV): full precision, seconds, shares as fractions, lint codes apart."""

    def v(x: float | None) -> str:
        return "" if x is None else repr(float(x))

    rows = []
    for r in lay.rows:
        p, pipe = r.point, r.pipeline
        rows.append(
            {
                "layout": r.layout,
                "runs_ok": str(p.succeeded),
                "runs": str(p.runs),
                f"{lay.metric.replace(' ', '_')}_s_median": v(r.time_s),
                "ci_low_s": v(r.time_ci[0]),
                "ci_high_s": v(r.time_ci[1]),
                "time_to_train_s_median": v(r.time_to_train_s),
                "relative_time": v(r.relative_time),
                "relative_ci_low": v(r.relative_ci[0]),
                "relative_ci_high": v(r.relative_ci[1]),
                "tokens_per_s_hmean": v(p.tokens_per_s),
                "tokens_per_s_per_worker": v(p.tokens_per_worker),
                "model_tflops_per_worker_median": v(r.tflops_per_worker),
                "mfu_median": v(r.mfu),
                "mfu_ci_low": v(r.mfu_ci[0]),
                "mfu_ci_high": v(r.mfu_ci[1]),
                "mfu_missing": r.mfu_missing,
                "mfu_flag": r.mfu_flag,
                **{f"{k}_share_median": v(p.breakdown.get(k)) for k in ("data", "compute", "optimizer")},
                # a comm share is only where comm was timed apart: else it is inside compute, not 0
                "comm_share_median": v(p.breakdown.get("comm")) if p.comm == "measured" else "",
                "comm": p.comm,
                "comm_holds": "; ".join(r.comm_holds),
                "inside_compute": "; ".join(r.inside_compute),
                "pipeline_schedule": pipe.schedule or "" if pipe else "",
                "microbatches": str(pipe.microbatches or "") if pipe else "",
                "virtual_stages": str(pipe.virtual_stages or "") if pipe else "",
                "bubble_analytic": v(pipe.bubble) if pipe else "",
                "rules_failing": " ".join(p.lint.get("fail", [])),
                "rules_unverifiable": " ".join(p.lint.get("cannot_verify", [])),
            }
        )
    header = list(rows[0]) if rows else []
    return [("all", header, [[row[k] for k in header] for row in rows])]
