"""The report's figures: matplotlib, vector output (SVG for the HTML/PDF, PDF and SVG files for papers)."""

from __future__ import annotations

import functools
import html
import io
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from weakref import WeakKeyDictionary

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import StrMethodFormatter

from honestscale.analysis.points import Point, ratio_rules, verdicts_text
from honestscale.report._copies import PaperCopies
from honestscale.report._model import ComparisonModel
from honestscale.report._units import unit_for

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
    "text.parse_math": False,  # names are drawn as written: "$\\undefinedcmd$" is a run name, not mathtext
    "pdf.fonttype": 42,
    "figure.dpi": 100,
}
PARTS = (("data", "#8c6bb1"), ("compute", "#3182bd"), ("comm", "#e6550d"), ("optimizer", "#31a354"))


@dataclass
class Rendered:
    name: str  # file stem
    caption: str
    svg: str  # for embedding


def _workers_axis(ax: Axes, workers: list[int]) -> None:
    """Workers on x: a log2 axis where the counts span a factor of 8 or more, a linear one otherwise."""
    ws = sorted(set(workers)) or [1]
    if ws[-1] / ws[0] >= 8:
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(StrMethodFormatter("{x:g}"))  # (a lambda could not travel pickled)
    else:
        pad = max(0.25, (ws[-1] - ws[0]) * 0.08)
        ax.set_xlim(ws[0] - pad, ws[-1] + pad)
    ax.set_xticks(ws)
    ax.set_xlabel("workers")


def _legend_above(ax: Axes, ncols: int = 3) -> None:
    """The legend above the plot, where it covers no data."""
    ax.legend(frameon=False, ncols=ncols, loc="lower left", bbox_to_anchor=(0.0, 1.0), borderaxespad=0.2)


# Per figure, the hover text of each point of a marked series: written into the SVG as <title> elements, so a
# browser shows value, interval, runs and verdicts under the pointer (the dashboard, or the SVG file opened alone).
_TIPS: WeakKeyDictionary[Figure, dict[str, list[str]]] = WeakKeyDictionary()
_SVG, _XLINK = "http://www.w3.org/2000/svg", "http://www.w3.org/1999/xlink"


def tip(p: Point, what: str, value: float | None, ci: Sequence[float | None], unit: str = "",
        lint: dict[str, list[str]] | None = None, base: bool = False) -> str:  # fmt: skip
    """What a point of a figure is: its value with the interval, the runs behind it and the rules' verdicts."""
    lo, hi = ci[0], ci[1]
    interval = (
        f" [95 % CI {lo:.4g}–{hi:.4g}]"
        if lo is not None and hi is not None
        else " (no interval: n too small)"
    )
    shown = "–" if value is None else f"{value:.4g}{unit}"
    rules = verdicts_text(p.lint if lint is None else lint)
    return (
        f"{p.workers} worker(s): {what} {shown}{interval}; {p.succeeded}/{p.runs} run(s) ok; rules: {rules}"
    )


def mark(fig: Figure, artist: Any, tips: list[str]) -> None:
    """Give each point drawn by ``artist`` (a Line2D with markers) its hover text."""
    tips_of = _TIPS.setdefault(fig, {})
    gid = f"hs-tips-{len(tips_of)}"
    artist.set_gid(gid)
    tips_of[gid] = tips


def _with_tips(svg: str, tips: dict[str, list[str]]) -> str:
    """The SVG with a <title> on each marked point: each marker becomes a group holding its title and itself."""
    if not tips:
        return svg
    ET.register_namespace("", _SVG)
    ET.register_namespace("xlink", _XLINK)
    root = ET.fromstring(svg)
    for group in root.iter(f"{{{_SVG}}}g"):
        texts = tips.get(group.get("id") or "")
        if texts is None:
            continue
        n = 0
        for parent in list(group.iter()):
            for i, child in enumerate(list(parent)):
                if child.tag != f"{{{_SVG}}}use" or n >= len(texts):
                    continue
                wrap = ET.Element(f"{{{_SVG}}}g", {"class": "hs-point"})
                ET.SubElement(wrap, f"{{{_SVG}}}title").text = texts[n]
                parent.remove(child)
                wrap.append(child)
                parent.insert(i, wrap)
                n += 1
    return ET.tostring(root, encoding="unicode")


def _bars(
    ax: Axes, x: list[float], y: list[float], cis: list[tuple[float | None, float | None]],
    tips: list[str] | None = None, **kw: Any,
) -> None:  # fmt: skip
    """Points with their interval where there is one (never at the base case, whose ratio is 1 by definition)."""
    lo = [v - c[0] if c[0] is not None else 0.0 for v, c in zip(y, cis, strict=True)]
    hi = [c[1] - v if c[1] is not None else 0.0 for v, c in zip(y, cis, strict=True)]
    drawn = ax.errorbar(x, y, yerr=[lo, hi], capsize=2, ms=4, lw=1.2, **kw)
    if tips:
        mark(ax.figure, drawn.lines[0], tips)  # type: ignore[arg-type]


def _time_metric_label(c: ComparisonModel) -> str:
    return c.metric.replace("median ", "")


def speedup(c: ComparisonModel) -> Figure:
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(6.4, 2.6))
    base = c.base_workers or 1
    ws = [p.workers for p in c.points]
    a1.plot(ws, [w / base for w in ws], "--", color="grey", lw=1, label="ideal")
    a2.axhline(1.0, ls="--", color="grey", lw=1, label="ideal")
    series = [
        ("speedup", "speedup_ci", "efficiency", "efficiency_ci", _time_metric_label(c), "#3182bd", "o-")
    ]
    if any(p.throughput_speedup is not None for p in c.points[1:]):
        # weak scaling: the scaled speedup (throughput) is the measure, and what Gustafson's law is fitted to
        label = "scaled speedup (throughput)" if c.mode == "weak" else "throughput"
        series.append(("throughput_speedup", "throughput_speedup_ci", "throughput_efficiency",
                       "throughput_efficiency_ci", label, "#e6550d", "s--"))  # fmt: skip
    top = 1.0
    for sp, sp_ci, eff, eff_ci, label, color, fmt in series:
        pts = [p for p in c.points if getattr(p, sp) is not None]
        if len(pts) < 2:
            continue
        _bars(a1, [p.workers for p in pts], [getattr(p, sp) for p in pts], [tuple(getattr(p, sp_ci)) for p in pts],
              [tip(p, f"{label} speedup", getattr(p, sp), getattr(p, sp_ci), "x", ratio_rules(p, sp), p is c.points[0])
               for p in pts],
              fmt=fmt, color=color, label=label)  # fmt: skip
        effs = [getattr(p, eff) for p in pts]
        cis = [tuple(getattr(p, eff_ci)) for p in pts]
        _bars(a2, [p.workers for p in pts], effs, cis,
              [tip(p, f"{label} efficiency", getattr(p, eff), getattr(p, eff_ci), "", ratio_rules(p, eff), p is c.points[0])
               for p in pts],
              fmt=fmt, color=color, label=label)  # fmt: skip
        top = max([top, *effs, *(c[1] for c in cis if c[1] is not None)])
    if c.fit is not None:
        p = c.fit.parameter
        xs = [w / base for w in ws]
        fit = [(1 - p) + p * x if c.fit.law == "gustafson" else 1 / ((1 - p) + p / x) for x in xs]
        label = f"{c.fit.law}, p = {p:.3f}" + ("" if c.fit.fitted else " (2 points: not fitted)")
        a1.plot(ws, fit, ":", color="black", lw=1, label=label)
    a1.set_ylabel(f"speedup over {base} worker(s)")
    a1.set_ylim(bottom=0)
    _legend_above(a1, ncols=2)
    _workers_axis(a1, ws)
    a2.set_ylim(0, top * 1.12)
    a2.set_ylabel("parallel efficiency")
    _legend_above(a2, ncols=3)
    _workers_axis(a2, ws)
    return fig


def _speedup_caption(c: ComparisonModel) -> str:
    thr = any(p.throughput_speedup is not None for p in c.points[1:])
    if c.mode == "weak":
        drawn = "on throughput (the scaled speedup, squares)" if thr else "(none: no throughput recorded)"
    else:
        drawn = f"on the {c.metric}" + (" (circles) and on throughput (squares)" if thr else "")
    fit = (
        ""
        if c.fit is None
        else (
            f", the {c.fit.law} law fitted to the {c.fit.quantity} dotted"
            if c.fit.fitted
            else f", the {c.fit.law} law through the two points dotted (not fitted)"
        )
    )
    if any(p.speedup_ci[0] is not None or p.throughput_speedup_ci[0] is not None for p in c.points[1:]):
        bars = "bars are the 95 % intervals of the ratios (bootstrap over repetitions), none at the base case"
    elif c.metric.startswith("MLPerf "):
        bars = f"no intervals: the {c.metric} is one number per point"
    else:
        bars = "no intervals: too few runs per point"
    return (
        f"Speedup (left) and parallel efficiency (right) {drawn} against workers; {bars}; ideal dashed{fit}."
    )


def time_to_solution(c: ComparisonModel) -> Figure:
    fig, ax = plt.subplots(figsize=(3.2, 2.4))
    use_tta = any(p.tta_s is not None for p in c.points)
    pts = [p for p in c.points if (p.tta_s if use_tta else p.time_s) is not None]
    unit, div = unit_for([t for p in c.points for t in (p.time_s, p.tta_s, p.mlperf_score_s, *p.time_ci)])
    ys = [((p.tta_s if use_tta else p.time_s) or 0) / div for p in pts]
    cis = [tuple(None if v is None else v / div for v in (p.tta_ci if use_tta else p.time_ci)) for p in pts]
    what = "median time to accuracy" if use_tta else "median time to train"
    tips = [tip(p, what, y, ci, f" {unit}") for p, y, ci in zip(pts, ys, cis, strict=True)]
    _bars(ax, [p.workers for p in pts], ys, cis, tips, fmt="o-", color="#3182bd")  # type: ignore[arg-type]
    ax.set_ylabel(("time to accuracy" if use_tta else "time to train") + f" [{unit}]")
    _workers_axis(ax, [p.workers for p in pts])
    ax.set_ylim(bottom=0)
    return fig


def _time_caption(c: ComparisonModel) -> str:
    what = "Time to accuracy" if any(p.tta_s is not None for p in c.points) else "Time to train"
    return f"{what}: median of the runs with its 95 % order-statistic interval (none where n is too small)."


def breakdown(c: ComparisonModel) -> Figure:
    fig, ax = plt.subplots(figsize=(3.2, 2.6))
    labels = [str(p.workers) for p in c.points]
    bottom = [0.0] * len(labels)
    for part, color in PARTS:
        vals = [100 * (p.breakdown.get(part) or 0.0) for p in c.points]
        ax.bar(labels, vals, bottom=bottom, color=color, label=part, width=0.6)
        bottom = [b + v for b, v in zip(bottom, vals, strict=True)]
    ax.set_ylabel("share of step time [%]")
    ax.set_xlabel("workers")
    ax.set_ylim(0, 100)
    _legend_above(ax, ncols=2)
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
    _workers_axis(ax, [p.workers for p in pts] or [1])
    return fig


def per_worker(c: ComparisonModel) -> Figure:
    fig, ax = plt.subplots(figsize=(3.2, 2.6))
    pts = [p for p in c.points if p.per_worker is not None]
    ax.plot([p.workers for p in pts], [p.per_worker or 0.0 for p in pts], "o-", color="#756bb1", ms=4, lw=1.2,
            label="measured")  # fmt: skip
    if pts:
        ax.axhline(pts[0].per_worker or 0, ls="--", color="grey", lw=1, label="ideal (the base case's)")
    _legend_above(ax, ncols=2)
    ax.set_ylabel("samples/s per worker")
    _workers_axis(ax, [p.workers for p in pts] or [1])
    ax.set_ylim(0, max([p.per_worker or 0.0 for p in pts] + [1.0]) * 1.1)
    return fig


def energy(c: ComparisonModel) -> Figure:
    """Energy to accuracy (else to train) against workers, median with its interval; the base case's as a flat
    line: where the points rise above it, scaling out cost energy."""
    fig, ax = plt.subplots(figsize=(3.2, 2.6))
    pts = [p for p in c.points if p.energy_j is not None]
    ys = [(p.energy_j or 0.0) / 1e3 for p in pts]
    cis = [tuple(None if v is None else v / 1e3 for v in p.energy_ci) for p in pts]
    tips = [tip(p, f"median {p.energy_metric}", y, ci, " kJ") for p, y, ci in zip(pts, ys, cis, strict=True)]
    _bars(ax, [p.workers for p in pts], ys, cis, tips, fmt="o-", color="#e6550d", label="measured")  # type: ignore[arg-type]
    if pts:
        ax.axhline(ys[0], ls="--", color="grey", lw=1, label="the base case's")
    _legend_above(ax, ncols=2)
    ax.set_ylabel(f"{pts[0].energy_metric if pts else 'energy'} [kJ]")
    _workers_axis(ax, [p.workers for p in pts] or [1])
    ax.set_ylim(bottom=0)
    return fig


def _energy_caption(c: ComparisonModel) -> str:
    pts = [p for p in c.points if p.energy_j is not None]
    what = pts[0].energy_metric if pts else "energy"
    sources = "/".join(sorted({p.energy_source for p in pts}))
    return (f"{what.capitalize()} against workers ({sources}): median of the runs with its 95 % order-statistic "
            "interval (none where n is too small); dashed, the base case's: above it, scaling out cost energy.")  # fmt: skip


def _has_breakdown(c: ComparisonModel) -> bool:
    return any(any(v is not None for v in p.breakdown.values()) for p in c.points)


Caption = Callable[[ComparisonModel], str]
FIGURES: tuple[tuple[str, Caption, Callable[[ComparisonModel], Figure], Callable[[ComparisonModel], bool]], ...] = (
    ("speedup", _speedup_caption, speedup,
     lambda c: sum(p.speedup is not None or p.throughput_speedup is not None for p in c.points) >= 2),
    ("time", _time_caption, time_to_solution, lambda c: any(p.time_s is not None for p in c.points)),
    ("breakdown", lambda c: "Where step time goes (warm-up excluded): data, compute, communication, optimizer; "
     "median share of the runs.", breakdown, _has_breakdown),
    ("accuracy", lambda c: f"Final accuracy at every scale ({'/'.join(sorted({p.accuracy_split or '?' for p in c.points}))} "
     "split), median of the runs.", accuracy, lambda c: any(p.accuracy is not None for p in c.points)),
    ("per-worker", lambda c: "Throughput per worker, harmonic mean of the runs' samples/s: flat is perfect scaling of "
     "the work per worker.", per_worker, lambda c: any(p.per_worker is not None for p in c.points)),
    ("energy", _energy_caption, energy, lambda c: any(p.energy_j is not None for p in c.points)),
)  # fmt: skip


def framework_times(c: ComparisonModel) -> Figure:
    fig, ax = plt.subplots(figsize=(3.2, 0.9 + 0.3 * max(1, len(c.frameworks))))
    rows = [f for f in c.frameworks if f.point.time_s is not None]
    unit, div = unit_for([t for f in rows for t in (f.point.time_s, *f.point.time_ci)])
    y = list(range(len(rows)))
    ax.barh(y, [(f.point.time_s or 0.0) / div for f in rows], color="#3182bd", height=0.6)
    for i, f in enumerate(rows):
        lo, hi = f.point.time_ci
        if lo is not None and hi is not None:
            ax.plot([lo / div, hi / div], [i, i], color="black", lw=1.2)
    ax.set_yticks(y, [f.framework for f in rows])
    ax.invert_yaxis()
    ax.set_xlabel(f"median time to train [{unit}]")
    ax.set_xlim(left=0)
    return fig


def framework_breakdown(c: ComparisonModel) -> Figure:
    fig, ax = plt.subplots(figsize=(3.2, 1.1 + 0.3 * max(1, len(c.frameworks))))
    rows = c.frameworks
    labels = [f.framework for f in rows]
    left = [0.0] * len(rows)
    for part, color in PARTS:
        vals = [100 * (f.point.breakdown.get(part) or 0.0) for f in rows]
        ax.barh(labels, vals, left=left, color=color, label=part, height=0.6)
        left = [a + v for a, v in zip(left, vals, strict=True)]
    for i, f in enumerate(rows):
        if not f.comm_measured:
            ax.text(101, i, f"comm {f.point.comm}", va="center", fontsize=6, color="#636363")
    ax.invert_yaxis()
    ax.set_xlim(0, 135)
    ax.set_xlabel("share of step time [%] (warm-up excluded)")
    _legend_above(ax, ncols=4)
    return fig


FRAMEWORK_FIGURES: tuple[tuple[str, str, Callable[[ComparisonModel], Figure], Callable[[ComparisonModel], bool]], ...] = (
    ("frameworks-time", "Median time to train per framework, with its 95 % order-statistic interval (where n allows).",
     framework_times, lambda c: any(f.point.time_s is not None for f in c.frameworks)),
    ("frameworks-breakdown", "Where each framework's step time goes (median share of the runs); frameworks that do "
     "not expose their gradient exchange count it in compute.", framework_breakdown,
     lambda c: any(any(v is not None for v in f.point.breakdown.values()) for f in c.frameworks)),
)  # fmt: skip


def to_svg(fig: Figure) -> str:
    """The figure as SVG text, every marked point with its hover text (``mark``), its styles as presentation
    attributes (``presentational``)."""
    fig.tight_layout()
    buf = io.StringIO()
    # tight: the saved figure holds every artist (legends above the axes included), nothing clipped
    fig.savefig(buf, format="svg", bbox_inches="tight")
    return presentational(_with_tips(buf.getvalue(), _TIPS.pop(fig, {})))


_STYLED = re.compile(r'<(?P<tag>[\w:]+)(?P<before>[^>]*?) style="(?P<style>[^"]*)"(?P<after>[^>]*)>')
_SHEET = re.compile(r'<style type="text/css">\*\{(?P<rules>[^}<]*)\}</style>')


def _declarations(css: str) -> list[tuple[str, str]]:
    return [
        (k.strip(), v.strip())
        for k, _, v in (d.partition(":") for d in css.split(";"))
        if k.strip() and v.strip()
    ]


def presentational(svg: str) -> str:
    """Matplotlib's SVG with every ``style="..."`` attribute and its ``<style>`` sheet (``*{stroke-linejoin: ...}``)
    written as SVG presentation attributes (``fill="#1f77b4"``; the sheet's on the root, inherited): what it draws
    is the same, and a page that allows no inline style (the dashboard's Content-Security-Policy has no
    ``'unsafe-inline'``) shows it whole. Matplotlib writes only properties that are presentation attributes (fill,
    stroke and its widths, caps, joins and dashes, font family and size, text-anchor); an attribute the element
    already has is kept."""

    def attrs(m: re.Match[str]) -> str:
        have = set(re.findall(r"\s([\w:-]+)=", m["before"] + m["after"]))
        added = "".join(
            f' {k}="{html.escape(v, quote=True)}"'
            for k, v in _declarations(html.unescape(m["style"]))
            if k not in have
        )
        return f"<{m['tag']}{m['before']}{added}{m['after']}>"

    sheet = _SHEET.search(svg)
    svg = _STYLED.sub(attrs, _SHEET.sub("", svg))
    if sheet is not None:
        root = "".join(f' {k}="{html.escape(v, quote=True)}"' for k, v in _declarations(sheet["rules"]))
        svg = re.sub(r"<svg\b", "<svg" + root, svg, count=1)
    return svg


def save(
    fig: Figure, stem: str, caption: str, out_dir: Path | None, copies: PaperCopies | None = None
) -> Rendered:
    """The figure as SVG text; with ``out_dir``, its SVG and PDF files there (the PDF by ``copies`` when given)."""
    svg = to_svg(fig)
    if out_dir is not None:
        (out_dir / f"{stem}.svg").write_text(svg, encoding="utf-8")
        (copies or PaperCopies(aside=False)).save(fig, out_dir / f"{stem}.pdf", STYLE)
    plt.close(fig)
    return Rendered(stem, caption, svg)


Planned = tuple[str, str, Callable[[], Figure]]  # file stem, caption, the drawing


def planned(c: ComparisonModel, index: int) -> list[Planned]:
    """The figures one scaling comparison has (what each shows decides whether it is drawn), not drawn yet."""
    return [(f"fig{index}-{name}", caption(c), functools.partial(draw, c))
            for name, caption, draw, applies in FIGURES if applies(c)]  # fmt: skip


def planned_frameworks(c: ComparisonModel, index: int) -> list[Planned]:
    """The figures of one framework comparison (one worker count), not drawn yet."""
    return [(f"fw{index}-{name}", caption, functools.partial(draw, c))
            for name, caption, draw, applies in FRAMEWORK_FIGURES if applies(c)]  # fmt: skip


def draw(figures: list[Planned], out_dir: Path | None, copies: PaperCopies | None = None) -> list[Rendered]:
    """The planned figures drawn: SVG text, and PDF + SVG files in ``out_dir`` for papers."""
    with plt.rc_context(STYLE):
        return [save(make(), stem, caption, out_dir, copies) for stem, caption, make in figures]


def render_frameworks(
    c: ComparisonModel, index: int, out_dir: Path | None, copies: PaperCopies | None = None
) -> list[Rendered]:
    """The figures of one framework comparison (one worker count)."""
    return draw(planned_frameworks(c, index), out_dir, copies)


def render(
    c: ComparisonModel, index: int, out_dir: Path | None, copies: PaperCopies | None = None
) -> list[Rendered]:
    """Every figure of one scaling comparison: SVG text, and PDF + SVG files in ``out_dir`` for papers."""
    return draw(planned(c, index), out_dir, copies)
