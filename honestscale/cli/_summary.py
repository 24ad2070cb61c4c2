"""``summary``'s table and JSON: one row per campaign, model, framework and worker count, each number with the
statistic it is."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.table import Table
from rich.text import Text

from honestscale.cli._output import _fmt_seconds, _name, _pct


def summary_records(rows: list[Any]) -> list[dict[str, Any]]:
    """``summary --format json``: one object per campaign, model, framework and worker count, each number with
    the statistic it is (the same as ``report`` and ``advise`` print for these runs)."""
    from honestscale.analysis.stats import CI_METHOD, RATE_STATISTIC, TIME_STATISTIC

    out = []
    for r in rows:
        p = r.point
        out.append(
            {
                "campaign": r.campaign,
                "campaigns": list(r.campaigns),
                "model": r.model,
                "dataset": r.dataset,
                "framework": r.framework,
                "workers": p.workers,
                "layout": r.layout,
                "runs": p.runs,
                "succeeded": p.succeeded,
                "scaling": r.mode,
                "series_split": r.split,
                "lint": p.lint,
                "time_to_train_s": p.time_s,
                "time_to_train_ci_s": list(p.time_ci),
                "time_to_accuracy_s": p.tta_s,
                "samples_per_s": p.throughput,
                "per_worker": p.per_worker,
                "steady_samples_per_s": p.steady_throughput,
                "tokens_per_s": p.tokens_per_s,
                "tokens_per_s_per_worker": p.tokens_per_worker,
                "mfu": None
                if p.mfu is None
                else {
                    "median": p.mfu.median,
                    "ci": [p.mfu.low, p.mfu.high],
                    "convention": p.mfu.convention,
                    "runs": p.mfu.runs,
                    "statistic": p.mfu.method,
                    "do_not_quote": "HS107" in (p.lint or {}).get("error", []),
                },
                "stall_share": p.stall_share,
                "data": p.breakdown.get("data"),
                "compute": p.breakdown.get("compute"),
                "comm": p.breakdown.get("comm"),
                "optimizer": p.breakdown.get("optimizer"),
                "comm_is": p.comm,
                "accuracy": p.accuracy,
                "accuracy_split": p.accuracy_split,
                "accuracy_metric": p.accuracy_metric,
                "accuracy_better": p.accuracy_better,
                "test_accuracy": p.accuracy if p.accuracy_split == "test" else None,
                "statistics": {
                    "times": TIME_STATISTIC,
                    "time_ci": CI_METHOD,
                    "throughput": RATE_STATISTIC,
                    "shares": "median of runs",
                    "accuracy": "median of runs",
                },
            }
        )
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


def _count(v: float | None) -> str:
    return "-" if v is None else f"{v:,.0f}"


def _accuracy(p: Any) -> str:
    if p.accuracy is None:
        return "-"
    lower = f" {p.accuracy_metric} (lower is better)" if p.accuracy_better == "lower" else ""
    return f"{p.accuracy:.4f} {p.accuracy_split or ''}".strip() + lower


def _energy(p: Any) -> str:
    if p.energy_j is None:
        return "not recorded"
    return f"{p.energy_j / 1e3:,.1f} kJ to {p.energy_metric.removeprefix('energy to ')}"


def _columns(rows: list[Any]) -> list[tuple[str, Callable[[Any], str | Text]]]:
    """The table's columns, each with its cell; a column of what no row has (tokens, MFU, energy, a layout beyond
    data parallel) left out."""
    from honestscale.analysis.points import verdicts_text

    def has(test: Callable[[Any], object]) -> bool:
        return any(test(r) for r in rows)

    cols: list[tuple[str, Callable[[Any], str | Text], bool]] = [
        ("campaign", lambda r: _name(r.campaign or "-"), True),
        ("model", lambda r: _name(r.model or "-"), True),
        ("framework", lambda r: _name(r.framework or "-"), True),
        ("workers", lambda r: str(r.point.workers), True),
        ("layout", lambda r: r.layout or "data parallel", has(lambda r: r.layout)),
        ("runs ok", lambda r: f"{r.point.succeeded}/{r.point.runs}", True),
        ("time to train", lambda r: _fmt_seconds(r.point.time_s), True),
        ("time to accuracy", lambda r: _fmt_seconds(r.point.tta_s), True),
        ("samples/s", lambda r: _count(r.point.throughput), True),
        ("per worker", lambda r: _count(r.point.per_worker), True),
        ("tokens/s", lambda r: _count(r.point.tokens_per_s), has(lambda r: r.point.tokens_per_s)),
        ("MFU (median [95 % CI])", lambda r: _mfu_cell(r.point), has(lambda r: r.point.mfu is not None)),
        ("data", lambda r: _pct(r.point.breakdown.get("data")), True),
        ("compute", lambda r: _pct(r.point.breakdown.get("compute")), True),
        (
            "comm",
            lambda r: (
                _pct(r.point.breakdown.get("comm"))
                if r.point.comm == "measured" or r.point.workers == 1
                else r.point.comm
            ),
            True,
        ),
        ("optimizer", lambda r: _pct(r.point.breakdown.get("optimizer")), True),
        ("accuracy", lambda r: _accuracy(r.point), True),
        ("energy (median)", lambda r: _energy(r.point), has(lambda r: r.point.energy_j is not None)),
        ("scaling", lambda r: r.mode or "-", True),
        ("rules", lambda r: verdicts_text(r.point.lint), True),
    ]
    return [(name, cell) for name, cell, shown in cols if shown]


def summary_table(rows: list[Any]) -> Table:
    from honestscale.analysis.stats import RATE_STATISTIC, TIME_STATISTIC

    rates = "samples/s and tokens/s" if any(r.point.tokens_per_s for r in rows) else "samples/s"
    table = Table(
        title=f"scaling summary, final runs: times are the {TIME_STATISTIC}, {rates} the "
        f"{RATE_STATISTIC}, shares and accuracy the median of runs",
        title_justify="left",
    )
    cols = _columns(rows)
    for name, _ in cols:
        table.add_column(name, justify="left" if name in ("campaign", "model", "framework") else "right")
    for r in rows:
        table.add_row(*(cell(r) for _, cell in cols))
    splits = sorted({f"{r.model} / {r.framework}: {r.split}" for r in rows if r.split})
    if splits:  # where a label parts one submitter's points into series, said under the table
        table.caption, table.caption_justify = "\n".join(splits), "left"
    return table
