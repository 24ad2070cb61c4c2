"""A report's tables for papers: the LaTeX (booktabs) and CSV forms of each comparison's numbers, with the rules'
verdicts in a column of their own."""

from __future__ import annotations

import re
from collections.abc import Callable

from honestscale.analysis.points import do_not_quote, verdicts_text
from honestscale.report._model import ComparisonModel, Point
from honestscale.report._text import _ci_in, _in, _pct, ratio_text
from honestscale.report._units import unit_for

_LATEX = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "✗": "fails",
    "✓": "ok",
    "–": "--",
    "—": "---",
    "×": r"$\times$",
    "≤": r"$\leq$",
    "≥": r"$\geq$",
    "±": r"$\pm$",
    "µ": r"$\mu$",
    "\u00a0": "~",
    "…": r"\ldots{}",
    "<": r"\textless{}",
    ">": r"\textgreater{}",
    "“": "``",
    "”": "''",
    "‘": "`",
    "’": "'",
    "·": r"\textperiodcentered{}",
}


def latex_escape(text: str) -> str:
    """Text as pdflatex with booktabs alone typesets it: specials escaped, symbols spelt, other non-ASCII as '?'."""
    return "".join(_LATEX.get(ch, ch if ch.isascii() else "?") for ch in text)


def latex_table(header: list[str], rows: list[list[str]], caption: str) -> str:
    cols = "l" + "r" * (len(header) - 1)
    lines = [
        r"\begin{table}[t]",
        r"\centering",
        rf"\caption{{{latex_escape(caption)}}}",
        rf"\begin{{tabular}}{{{cols}}}",
        r"\toprule",
        " & ".join(latex_escape(h) for h in header) + r" \\",
        r"\midrule",
    ]
    lines += [" & ".join(latex_escape(c) for c in row) + r" \\" for row in rows]
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}", ""]
    return "\n".join(lines)


def _f(v: float | None, d: int = 2) -> str:
    return "" if v is None else f"{v:.{d}f}"


def _codes(p: Point) -> str:
    return verdicts_text(p.lint)


def _rates_only(p: Point) -> str:
    """`` (do not quote: error-severity HS111 fails)`` beside a ratio of throughput that a rule marks and the
    point's ratios of time are not (a time to solution's throughput across different batches); else ''."""
    extra = sorted(set(p.rate_ratio_lint.get("error", [])) - set(p.ratio_lint.get("error", [])))
    flag = do_not_quote({"error": extra}) if p.throughput_speedup is not None else None
    return f" ({flag})" if flag else ""


def results_tables(c: ComparisonModel) -> list[tuple[str, list[str], list[list[str]]]]:
    """The series' tables for a paper, at most 6 columns each: times, then scaling (as the PDF prints them)."""
    unit, div = unit_for([t for p in c.points for t in (p.time_s, p.tta_s, p.mlperf_score_s, *p.time_ci)])

    def t(v: float | None) -> str:
        return _in(v, (unit, div)) if v is not None else ""

    extra: list[tuple[str, Callable[[Point], str]]] = []  # (header, cell) after the time to train
    if any(p.tta_s is not None for p in c.points):
        extra.append((f"time to accuracy [{unit}]", lambda p: t(p.tta_s)))
    if any(p.mlperf_official_s is not None for p in c.points):
        # six columns fit a paper's column: the official score beside the olympic mean it scales, in one cell
        extra.append(
            (
                f"MLPerf olympic mean (official score) [{unit}]",
                lambda p: f"{t(p.mlperf_score_s)} ({t(p.mlperf_official_s)})",
            )
        )
    elif any(p.mlperf_score_s is not None for p in c.points):
        extra.append((f"MLPerf olympic mean [{unit}]", lambda p: t(p.mlperf_score_s)))
    extra = extra or [("global batch", lambda p: " ".join(map(str, p.global_batch)))]
    # the interval in the time's cell: six columns fit a paper's column with time to accuracy and the MLPerf score
    times = [
        ["workers", "runs ok", f"time to train (95 % CI) [{unit}]", *(h for h, _ in extra), "rules failing"]
    ]
    for p in c.points:
        ci = _ci_in(p.time_ci, (unit, div)).replace("n too small", "").strip()
        times.append(
            [
                str(p.workers),
                f"{p.succeeded}/{p.runs}",
                f"{t(p.time_s)} ({ci})" if ci else t(p.time_s),
                *(cell(p) for _, cell in extra),
                _codes(p),
            ]
        )
    scaling = [
        [
            "workers",
            "speedup [95 % CI]",
            "efficiency [95 % CI]",
            "throughput speedup [95 % CI]",
            "throughput efficiency [95 % CI]",
            "rules failing (with the base)",
        ]
    ]
    rates = [["workers", "samples/s", "per worker", "steady-state samples/s", "stall share", "accuracy"]]
    for p in c.points:
        scaling.append(
            [
                str(p.workers),
                ratio_text(p.speedup, p.speedup_ci),
                ratio_text(p.efficiency, p.efficiency_ci, pct=True),
                ratio_text(p.throughput_speedup, p.throughput_speedup_ci) + _rates_only(p),
                ratio_text(p.throughput_efficiency, p.throughput_efficiency_ci, pct=True) + _rates_only(p),
                verdicts_text(p.ratio_lint),
            ]
        )
        rates.append(
            [
                str(p.workers),
                _f(p.throughput, 0),
                _f(p.per_worker, 0),
                _f(p.steady_throughput, 0),
                _pct(p.stall_share) if p.stall_share is not None else "",
                f"{_f(p.accuracy, 4)} {p.accuracy_split or ''}".strip(),
            ]
        )
    return [
        ("times", times[0], times[1:]),
        ("scaling", scaling[0], scaling[1:]),
        ("throughput", rates[0], rates[1:]),
    ]


def _codes_of(lint: dict[str, list[str]] | None) -> tuple[str, str]:
    """The failing and the unverifiable rules, as plain codes (CSV)."""
    return " ".join((lint or {}).get("fail", [])), " ".join((lint or {}).get("cannot_verify", []))


def _value(v: float | None) -> str:
    return "" if v is None else f"{v:.6g}"


def _with_ci(name: str, v: float | None, ci: tuple[float | None, float | None]) -> dict[str, str]:
    return {name: _value(v), f"{name}_ci_low": _value(ci[0]), f"{name}_ci_high": _value(ci[1])}


def _columns(rows: list[dict[str, str]]) -> tuple[list[str], list[list[str]]]:
    header = list(rows[0]) if rows else []
    return header, [[r[k] for k in header] for r in rows]


def results_values(c: ComparisonModel) -> list[tuple[str, list[str], list[list[str]]]]:
    """The series' tables as values for a spreadsheet or a plotting script: numbers in seconds (or plain ratios and
    fractions), each interval end in its own column, the split and the rules in their own columns."""
    times, scaling, rates = [], [], []
    for p in c.points:
        fail, unknown = _codes_of(p.lint)
        times.append(
            {
                "workers": str(p.workers),
                "runs_ok": str(p.succeeded),
                "runs": str(p.runs),
                "global_batch": " ".join(map(str, p.global_batch)),
                **_with_ci("time_to_train_s", p.time_s, p.time_ci),
                "time_to_accuracy_s": _value(p.tta_s),
                "mlperf_olympic_mean_s": _value(p.mlperf_score_s),
                "mlperf_scaling_factor": _value(p.mlperf_scaling_factor),
                "mlperf_official_score_s": _value(p.mlperf_official_s),
                "rules_failing": fail,
                "rules_unverifiable": unknown,
            }
        )
        fail, unknown = _codes_of(p.ratio_lint)
        scaling.append(
            {
                "workers": str(p.workers),
                **_with_ci("speedup", p.speedup, p.speedup_ci),
                **_with_ci("efficiency", p.efficiency, p.efficiency_ci),
                **_with_ci("throughput_speedup", p.throughput_speedup, p.throughput_speedup_ci),
                **_with_ci("throughput_efficiency", p.throughput_efficiency, p.throughput_efficiency_ci),
                "rules_failing": fail,
                "rules_unverifiable": unknown,
            }
        )
        rates.append(
            {
                "workers": str(p.workers),
                "samples_per_s": _value(p.throughput),
                "samples_per_s_per_worker": _value(p.per_worker),
                "steady_samples_per_s": _value(p.steady_throughput),
                "stall_share": _value(p.stall_share),
                "accuracy": _value(p.accuracy),
                "accuracy_split": p.accuracy_split or "",
            }
        )
    return [("times", *_columns(times)), ("scaling", *_columns(scaling)), ("throughput", *_columns(rates))]


def framework_values(c: ComparisonModel) -> list[tuple[str, list[str], list[list[str]]]]:
    """A framework comparison as values (see :func:`results_values`)."""
    times, parts = [], []
    for fw in c.frameworks:
        p = fw.point
        fail, unknown = _codes_of(p.lint)
        times.append(
            {
                "framework": fw.framework,
                "versions": " ".join(fw.versions),
                "runs_ok": str(p.succeeded),
                "runs": str(p.runs),
                **_with_ci("time_to_train_s", p.time_s, p.time_ci),
                "relative_time": _value(fw.relative_time),
                "rules_failing": fail,
                "rules_unverifiable": unknown,
            }
        )
        shares = {f"{k}_share": _value(p.breakdown.get(k)) for k in ("data", "compute", "comm", "optimizer")}
        parts.append(
            {
                "framework": fw.framework,
                "samples_per_s": _value(p.throughput),
                **shares,
                "comm_measured": str(p.comm == "measured").lower(),
            }
        )
    return [("times", *_columns(times)), ("breakdown", *_columns(parts))]


def framework_tables(c: ComparisonModel) -> list[tuple[str, list[str], list[list[str]]]]:
    """A framework comparison for a paper: times, then the step breakdown (at most 6 columns each)."""
    unit, div = unit_for([t for f in c.frameworks for t in (f.point.time_s, *f.point.time_ci)])
    times = [
        [
            "framework",
            "runs ok",
            f"time to train [{unit}]",
            f"95 % CI [{unit}]",
            "relative time",
            "rules failing",
        ]
    ]
    parts = [["framework", "samples/s", "data", "compute", "comm", "optimizer"]]
    for fw in c.frameworks:
        p = fw.point
        times.append(
            [
                f"{fw.framework} {' '.join(fw.versions)}".strip(),
                f"{p.succeeded}/{p.runs}",
                _in(p.time_s, (unit, div)),
                _ci_in(p.time_ci, (unit, div)).replace("n too small", ""),
                _f(fw.relative_time),
                _codes(p),
            ]
        )
        shares = [_pct(p.breakdown.get(k)) for k in ("data", "compute", "comm", "optimizer")]
        if p.comm != "measured":
            shares[2] = p.comm
        parts.append([fw.framework, _f(p.throughput, 0), *shares])
    return [("times", times[0], times[1:]), ("breakdown", parts[0], parts[1:])]


def _slug(text: str) -> str:
    """A file name from a label: the whole label, lower case, punctuation as dashes (never cut short)."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:200] or "comparison"
