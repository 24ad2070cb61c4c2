"""The report's figures: matplotlib, vector output (SVG for the HTML/PDF, PDF and SVG files for papers)."""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from honestscale.report._model import ComparisonModel

STYLE: Any = {
    "font.size": 8,
    "axes.titlesize": 9,
    "axes.labelsize": 8,
    "legend.fontsize": 7,
    "xtick.labelsize": 7,
    "ytick.labelsize": 7,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "svg.fonttype": "none",  # text stays text: searchable in the PDF
    "pdf.fonttype": 42,
    "figure.dpi": 100,
}
PARTS = (("data", "#8c6bb1"), ("compute", "#3182bd"), ("comm", "#e6550d"), ("optimizer", "#31a354"))


@dataclass
class Rendered:
    name: str  # file stem
    caption: str
    svg: str  # for embedding


def _log2(ax: Axes, workers: list[int]) -> None:
    ax.set_xscale("log", base=2)
    ax.set_xticks(workers)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_xlabel("workers")


def speedup(c: ComparisonModel) -> Figure:
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(6.4, 2.4))
    pts = [p for p in c.points if p.speedup is not None]
    w = [p.workers for p in pts]
    base = c.base_workers or 1
    a1.plot(w, [x / base for x in w], "--", color="grey", lw=1, label="ideal")
    if c.fit is not None:
        p = c.fit.parameter
        xs = [x / base for x in w]
        fit = [(1 - p) + p * x if c.fit.law == "gustafson" else 1 / ((1 - p) + p / x) for x in xs]
        a1.plot(w, fit, ":", color="black", lw=1, label=f"{c.fit.law}, p = {p:.3f}")
    lo = [p.speedup - p.speedup_ci[0] if p.speedup_ci[0] is not None and p.speedup else 0 for p in pts]
    hi = [p.speedup_ci[1] - p.speedup if p.speedup_ci[1] is not None and p.speedup else 0 for p in pts]
    a1.errorbar(w, [p.speedup for p in pts], yerr=[lo, hi], fmt="o-", color="#3182bd", lw=1.2, ms=4, capsize=2,
                label="measured")  # fmt: skip
    a1.set_yscale("log", base=2)
    a1.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    a1.set_ylabel(f"speedup over {base} worker(s)")
    a1.set_title(f"speedup ({c.mode or '?'} scaling, {c.metric})")
    a1.legend(frameon=False)
    _log2(a1, w)
    a2.axhline(1.0, ls="--", color="grey", lw=1)
    a2.plot(w, [p.efficiency for p in pts], "o-", color="#e6550d", lw=1.2, ms=4)
    a2.set_ylim(0, max(1.1, max((p.efficiency or 0) for p in pts) * 1.1))
    a2.set_ylabel("parallel efficiency")
    a2.set_title("efficiency")
    _log2(a2, w)
    return fig


def time_to_solution(c: ComparisonModel) -> Figure:
    fig, ax = plt.subplots(figsize=(3.2, 2.4))
    use_tta = any(p.tta_s is not None for p in c.points)
    pts = [p for p in c.points if (p.tta_s if use_tta else p.time_s) is not None]
    ys = [((p.tta_s if use_tta else p.time_s) or 0) / 60 for p in pts]
    cis = [p.tta_ci if use_tta else p.time_ci for p in pts]
    lo = [y - ci[0] / 60 if ci[0] is not None else 0 for y, ci in zip(ys, cis, strict=True)]
    hi = [ci[1] / 60 - y if ci[1] is not None else 0 for y, ci in zip(ys, cis, strict=True)]
    ax.errorbar(
        [p.workers for p in pts], ys, yerr=[lo, hi], fmt="o-", color="#3182bd", capsize=3, ms=4, lw=1.2
    )
    ax.set_ylabel(("time to accuracy" if use_tta else "time to train") + " [min]")
    ax.set_title("median, 95 % CI (order statistics)")
    _log2(ax, [p.workers for p in pts])
    ax.set_ylim(bottom=0)
    return fig


def breakdown(c: ComparisonModel) -> Figure:
    fig, ax = plt.subplots(figsize=(3.2, 2.4))
    labels = [str(p.workers) for p in c.points]
    bottom = [0.0] * len(labels)
    for part, color in PARTS:
        vals = [100 * (p.breakdown.get(part) or 0.0) for p in c.points]
        ax.bar(labels, vals, bottom=bottom, color=color, label=part, width=0.6)
        bottom = [b + v for b, v in zip(bottom, vals, strict=True)]
    ax.set_ylabel("share of step time [%]")
    ax.set_xlabel("workers")
    ax.set_ylim(0, 100)
    ax.legend(frameon=False, ncols=2, loc="lower left")
    ax.set_title("step time breakdown (warm-up excluded)")
    return fig


def accuracy(c: ComparisonModel) -> Figure:
    fig, ax = plt.subplots(figsize=(3.2, 2.4))
    pts = [p for p in c.points if p.accuracy is not None]
    ax.plot(
        [p.workers for p in pts], [100 * (p.accuracy or 0) for p in pts], "o-", color="#31a354", ms=4, lw=1.2
    )
    values = [100 * (p.accuracy or 0) for p in pts]
    if values:  # at least 4 points of range: run-to-run noise must not look like a collapse
        mid, half = (max(values) + min(values)) / 2, max(2.0, (max(values) - min(values)) / 2 + 0.5)
        ax.set_ylim(mid - half, mid + half)
    split = "/".join(sorted({p.accuracy_split or "?" for p in pts}))
    ax.set_ylabel(f"final accuracy, {split} [%]")
    ax.set_title("accuracy at every scale (median)")
    _log2(ax, [p.workers for p in pts] or [1])
    return fig


def per_worker(c: ComparisonModel) -> Figure:
    fig, ax = plt.subplots(figsize=(3.2, 2.4))
    pts = [p for p in c.points if p.per_worker is not None]
    ax.plot([p.workers for p in pts], [p.per_worker or 0.0 for p in pts], "o-", color="#756bb1", ms=4, lw=1.2)
    if pts:
        ax.axhline(pts[0].per_worker or 0, ls="--", color="grey", lw=1, label="ideal (base)")
        ax.legend(frameon=False)
    ax.set_ylabel("samples/s per worker (harmonic mean)")
    ax.set_title("throughput per worker")
    _log2(ax, [p.workers for p in pts] or [1])
    ax.set_ylim(bottom=0)
    return fig


FIGURES: tuple[tuple[str, str, Callable[[ComparisonModel], Figure], Callable[[ComparisonModel], bool]], ...] = (
    ("speedup", "Speedup and parallel efficiency against workers (log2), ideal line dashed, fitted bound dotted.",
     speedup, lambda c: sum(p.speedup is not None for p in c.points) >= 2),
    ("time", "Time to accuracy (or to train): median with 95 % order-statistic interval.", time_to_solution,
     lambda c: any(p.time_s is not None for p in c.points)),
    ("breakdown", "Where step time goes: data, compute, communication, optimizer.", breakdown,
     lambda c: any(any(v is not None for v in p.breakdown.values()) for p in c.points)),
    ("accuracy", "Final accuracy at every scale.", accuracy, lambda c: any(p.accuracy is not None for p in c.points)),
    ("per-worker", "Throughput per worker: flat is perfect (weak) scaling.", per_worker,
     lambda c: any(p.per_worker is not None for p in c.points)),
)  # fmt: skip


def framework_times(c: ComparisonModel) -> Figure:
    fig, ax = plt.subplots(figsize=(3.2, 2.4))
    rows = [f for f in c.frameworks if f.point.time_s is not None]
    y = list(range(len(rows)))
    ax.barh(y, [f.point.time_s or 0.0 for f in rows], color="#3182bd", height=0.6)
    for i, f in enumerate(rows):
        lo, hi = f.point.time_ci
        if lo is not None and hi is not None:
            ax.plot([lo, hi], [i, i], color="black", lw=1.2)
    ax.set_yticks(y, [f.framework for f in rows])
    ax.invert_yaxis()
    ax.set_xlabel("median time to train [s] (95 % interval where n allows)")
    ax.set_xlim(left=0)
    ax.set_title(f"{c.key_workers} worker(s)")
    return fig


def framework_breakdown(c: ComparisonModel) -> Figure:
    fig, ax = plt.subplots(figsize=(3.2, 2.4))
    rows = c.frameworks
    labels = [f.framework for f in rows]
    left = [0.0] * len(rows)
    for part, color in PARTS:
        vals = [100 * (f.point.breakdown.get(part) or 0.0) for f in rows]
        ax.barh(labels, vals, left=left, color=color, label=part, height=0.6)
        left = [a + v for a, v in zip(left, vals, strict=True)]
    for i, f in enumerate(rows):
        if not f.comm_measured:
            ax.text(101, i, "comm not exposed", va="center", fontsize=6, color="#636363")
    ax.invert_yaxis()
    ax.set_xlim(0, 135)
    ax.set_xlabel("share of step time [%] (warm-up excluded)")
    ax.legend(frameon=False, ncols=4, loc="lower center", bbox_to_anchor=(0.4, 1.0), fontsize=6)
    return fig


FRAMEWORK_FIGURES: tuple[tuple[str, str, Callable[[ComparisonModel], Figure]], ...] = (
    ("frameworks-time", "Median time to train per framework, with its 95 % order-statistic interval.", framework_times),
    ("frameworks-breakdown", "Where each framework's step time goes; frameworks that do not expose their gradient "
     "exchange count it in compute.", framework_breakdown),
)  # fmt: skip


def _save(fig: Figure, stem: str, caption: str, out_dir: Path | None) -> Rendered:
    fig.tight_layout()
    buf = io.StringIO()
    fig.savefig(buf, format="svg")
    svg = buf.getvalue()
    if out_dir is not None:
        (out_dir / f"{stem}.svg").write_text(svg, encoding="utf-8")
        fig.savefig(out_dir / f"{stem}.pdf", format="pdf")
    plt.close(fig)
    return Rendered(stem, caption, svg)


def render_frameworks(c: ComparisonModel, index: int, out_dir: Path | None) -> list[Rendered]:
    """The figures of one framework comparison (one worker count)."""
    with plt.rc_context(STYLE):
        return [
            _save(draw(c), f"fw{index}-{name}", caption, out_dir) for name, caption, draw in FRAMEWORK_FIGURES
        ]


def render(c: ComparisonModel, index: int, out_dir: Path | None) -> list[Rendered]:
    """Every figure of one scaling comparison: SVG text, and PDF + SVG files in ``out_dir`` for papers."""
    out: list[Rendered] = []
    with plt.rc_context(STYLE):
        for name, caption, draw, applies in FIGURES:
            if not applies(c):
                continue
            out.append(_save(draw(c), f"fig{index}-{name}", caption, out_dir))
    return out
