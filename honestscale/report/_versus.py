"""The comparison of A and B as a report (``honestscale compare A B --output compare.pdf``) and as a section the
dashboard's Compare page includes: per pair, both sides' distributions drawn (every run, with the statistic and its
interval), the measures table, the factor and the confounds, and the rules' verdicts about both sides."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from honestscale.analysis.points import sig
from honestscale.analysis.stats import CI_METHOD, DECISION_RULE, RATIO_METHOD, TEST_METHOD
from honestscale.compare import Compared, Measure, Result
from honestscale.report._figures import STYLE, mark, save
from honestscale.report._render import publish, staged
from honestscale.spreadsheet import to_csv

_COLOURS = ("#3182bd", "#e6550d")


@dataclass
class PairView:
    """A pair as the section template sees it: the pair, its figure's file stem and SVG, its anchor."""

    c: Compared
    anchor: str
    figure: str  # file stem
    svg: str
    caption: str


def _panel(ax: Any, m: Measure, fig: Figure) -> None:
    """Every run of A and B on one measure (jittered), the statistic as a bar, its 95 % interval as a line."""
    rng = np.random.default_rng(0)
    for i, (side, s) in enumerate((("A", m.a), ("B", m.b))):
        xs = i + rng.uniform(-0.12, 0.12, len(s.values))
        (dots,) = ax.plot(xs, s.values, "o", ms=3.5, alpha=0.75, color=_COLOURS[i], label=f"{side}: each run")
        mark(fig, dots, [f"{side}: one run, {v:.4g} {m.unit}" for v in s.values])
        if s.centre is not None:
            ax.hlines(s.centre, i - 0.3, i + 0.3, color="black", lw=1.6)
            lo, hi = s.ci
            if lo is not None and hi is not None:
                ax.vlines(i + 0.34, lo, hi, color="black", lw=1.0)
    ax.set_xticks([0, 1], ["A", "B"])
    ax.set_xlim(-0.6, 1.6)
    ax.set_ylabel(f"{m.name} [{m.unit}]")
    r = m.ratio
    ratio = (
        "–"
        if r is None
        else sig(r.value, 3) + (f" [{sig(r.low, 3)}, {sig(r.high, 3)}]" if r.has_interval else "")
    )
    d = m.difference
    p = d.p_value if d else None
    verdict = f"\n{d.verdict}" if d else ""  # the decision rule's verdict, as the sentence beside it says
    ax.set_title(f"{m.name}\nB/A {ratio}" + (f", p = {p:.2g}" if p is not None else "") + verdict, fontsize=8)


def figure(c: Compared) -> Figure:
    shown = [m for m in c.measures if m.a.values or m.b.values]
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(
            1, max(1, len(shown)), figsize=(3.0 * max(1, len(shown)), 2.8), squeeze=False
        )
        for ax, m in zip(axes[0], shown, strict=False):
            _panel(ax, m, fig)
        return fig


def _caption(c: Compared) -> str:
    v = c.verdicts
    stats = ", ".join(f"{m.name}: {m.statistic}" for m in c.measures)
    return (f"{c.pair.label}: every run of A and B (dots), the statistic (bar: {stats}) and its 95 % interval "
            f"(line). Rules failing about these runs: {', '.join(v['fail']) or 'none'}; cannot verify: "
            f"{', '.join(v['cannot_verify']) or 'none'}.")  # fmt: skip


def pair_views(result: Result, assets: Path | None) -> list[PairView]:
    """The figures of every pair (SVG text; PDF and SVG files in ``assets`` when given)."""
    out = []
    for i, c in enumerate(result.pairs, start=1):
        drawn = save(figure(c), f"pair{i}", _caption(c), assets)
        out.append(PairView(c, f"pair-{i}", drawn.name, drawn.svg, drawn.caption))
    return out


def _rows(result: Result) -> tuple[list[str], list[list[str]]]:
    header = ["pair", "measure", "statistic", "A", "A low", "A high", "n A", "B", "B low", "B high", "n B", "B/A",
              "B/A low", "B/A high", "p (Mann-Whitney)", "verdict"]  # fmt: skip

    def f(v: float | None) -> str:
        return "" if v is None else f"{v:.6g}"

    rows = []
    for c in result.pairs:
        for m in c.measures:
            r, d = m.ratio, m.difference
            rows.append([c.pair.label, m.name, m.statistic, f(m.a.centre), f(m.a.ci[0]), f(m.a.ci[1]),
                         str(len(m.a.values)), f(m.b.centre), f(m.b.ci[0]), f(m.b.ci[1]), str(len(m.b.values)),
                         f(r.value if r else None), f(r.low if r else None), f(r.high if r else None),
                         f(d.p_value if d else None), "" if d is None else d.verdict])  # fmt: skip
    return header, rows


def context(result: Result, views: list[PairView], gate: Any = ()) -> dict[str, object]:
    """What the section template reads (the report and the dashboard alike)."""
    return {"result": result, "pairs": views, "gate": list(gate),
            "methods": {"ci": CI_METHOD, "ratio": RATIO_METHOD, "test": TEST_METHOD, "decision": DECISION_RULE}}  # fmt: skip


def compare_report(result: Result, *, pdf: Path | None, html: Path | None, gate: Any = ()) -> list[Path]:
    """Write the comparison as PDF and/or HTML, with ``<name>_files/`` (figures as PDF and SVG, pairs.csv); whole
    or not at all (written aside, swapped in at the end)."""
    target = pdf or html or Path("compare.pdf")
    assets = target.with_name(target.stem + "_files")
    with staged(pdf, html, assets) as (staging, partials):
        views = pair_views(result, staging)
        (staging / "pairs.csv").write_text(to_csv(*_rows(result)), encoding="utf-8")
        publish(
            "comparison.html.j2",
            context(result, views, gate),
            "comparison.html",
            staging=staging,
            pdf=pdf,
            html=html,
            assets=assets,
            partials=partials,
            figures="pair",
        )
    return [p for p in (pdf, html) if p is not None] + [assets]
