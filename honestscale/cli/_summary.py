"""``summary``'s table and JSON: one row per campaign, model, framework and worker count, each number with the
statistic it is."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from honestscale.cli._output import _fmt_seconds, _name, _pct


def summary_records(rows: list[Any]) -> list[dict[str, Any]]:
    """``summary --format json``: one object per campaign, model, framework and worker count, each number with
    the statistic it is (the same as ``report`` and ``advise`` print for these runs)."""
    from honestscale.analysis.stats import CI_METHOD, RATE_STATISTIC, TIME_STATISTIC

    out = []
    for r in rows:
        p = r.point
        out.append({
            "campaign": r.campaign, "campaigns": list(r.campaigns), "model": r.model, "dataset": r.dataset, "framework": r.framework,
            "workers": p.workers, "layout": r.layout, "runs": p.runs, "succeeded": p.succeeded, "scaling": r.mode, "lint": p.lint,
            "time_to_train_s": p.time_s, "time_to_train_ci_s": list(p.time_ci), "time_to_accuracy_s": p.tta_s,
            "samples_per_s": p.throughput, "per_worker": p.per_worker, "steady_samples_per_s": p.steady_throughput,
            "tokens_per_s": p.tokens_per_s, "tokens_per_s_per_worker": p.tokens_per_worker,
            "mfu": None if p.mfu is None else {"median": p.mfu.median, "ci": [p.mfu.low, p.mfu.high],
                                               "convention": p.mfu.convention, "runs": p.mfu.runs,
                                               "statistic": p.mfu.method,
                                               "do_not_quote": "HS107" in (p.lint or {}).get("error", [])},
            "stall_share": p.stall_share, "data": p.breakdown.get("data"), "compute": p.breakdown.get("compute"),
            "comm": p.breakdown.get("comm"), "optimizer": p.breakdown.get("optimizer"), "comm_is": p.comm,
            "accuracy": p.accuracy, "accuracy_split": p.accuracy_split, "accuracy_metric": p.accuracy_metric,
            "accuracy_better": p.accuracy_better,
            "test_accuracy": p.accuracy if p.accuracy_split == "test" else None,
            "statistics": {"times": TIME_STATISTIC, "time_ci": CI_METHOD, "throughput": RATE_STATISTIC,
                           "shares": "median of runs", "accuracy": "median of runs"},
        })  # fmt: skip
    return out


def _mfu_cell(p: Any) -> str:
    """The point's MFU (median of runs, its interval where there is one, the convention), marked "do not quote"
    where HS107 fails as an error on its runs (an MFU over 100 %)."""
    from honestscale.analysis.points import DO_NOT_QUOTE

    if p.mfu is None:
        return "cannot verify"
    ci = (
        f" [{100 * p.mfu.low:.1f}, {100 * p.mfu.high:.1f}]"
        if p.mfu.low is not None and p.mfu.high is not None
        else ""
    )
    flag = f" — {DO_NOT_QUOTE}" if "HS107" in (p.lint or {}).get("error", []) else ""
    return f"{100 * p.mfu.median:.1f} %{ci} ({p.mfu.convention}){flag}"


def summary_table(rows: list[Any]) -> Table:
    from honestscale.analysis.points import verdicts_text
    from honestscale.analysis.stats import RATE_STATISTIC, TIME_STATISTIC

    tokens = any(r.point.tokens_per_s for r in rows)  # a column only where some run counted tokens
    rates = "samples/s and tokens/s" if tokens else "samples/s"
    table = Table(title=f"scaling summary, final runs: times are the {TIME_STATISTIC}, {rates} the "
                  f"{RATE_STATISTIC}, shares and accuracy the median of runs", title_justify="left")  # fmt: skip
    cols: tuple[str, ...] = ("campaign", "model", "framework", "workers", "runs ok", "time to train", "time to accuracy", "samples/s",
            "per worker", "data", "compute", "comm", "optimizer", "accuracy", "scaling", "rules")  # fmt: skip
    energy = any(r.point.energy_j is not None for r in rows)  # a column only where some run measured it
    cols = (*cols[:-2], "energy (median)", *cols[-2:]) if energy else cols
    layouts = any(r.layout for r in rows)  # a column only where some runs are more than data parallel
    if tokens:
        at = cols.index("per worker") + 1
        cols = (*cols[:at], "tokens/s", *cols[at:])
    mfu = any(r.point.mfu is not None for r in rows)  # a column only where some run's MFU could be recomputed
    if mfu:
        at = cols.index("data")
        cols = (*cols[:at], "MFU (median [95 % CI])", *cols[at:])
    if layouts:
        at = cols.index("workers") + 1
        cols = (*cols[:at], "layout", *cols[at:])
    for col in cols:
        table.add_column(col, justify="left" if col in ("campaign", "model", "framework") else "right")
    for r in rows:
        p = r.point
        comm = _pct(p.breakdown.get("comm")) if p.comm == "measured" or p.workers == 1 else p.comm
        extra = () if not energy else ("not recorded" if p.energy_j is None else f"{p.energy_j / 1e3:,.1f} kJ to "
                                       f"{p.energy_metric.removeprefix('energy to ')}",)  # fmt: skip
        table.add_row(
            _name(r.campaign or "-"), _name(r.model or "-"), _name(r.framework or "-"), str(p.workers),
            *([r.layout or "data parallel"] if layouts else []), f"{p.succeeded}/{p.runs}",
            _fmt_seconds(p.time_s), _fmt_seconds(p.tta_s),
            "-" if p.throughput is None else f"{p.throughput:,.0f}",
            "-" if p.per_worker is None else f"{p.per_worker:,.0f}",
            *(["-" if p.tokens_per_s is None else f"{p.tokens_per_s:,.0f}"] if tokens else []),
            *([_mfu_cell(p)] if mfu else []), _pct(p.breakdown.get("data")), _pct(p.breakdown.get("compute")), comm, _pct(p.breakdown.get("optimizer")),
            "-" if p.accuracy is None else f"{p.accuracy:.4f} {p.accuracy_split or ''}".strip()
            + (f" {p.accuracy_metric} (lower is better)" if p.accuracy_better == "lower" else ""),
            *extra, r.mode or "-", verdicts_text(p.lint),
        )  # fmt: skip
    return table
