"""What a campaign's report holds, decided without drawing anything: each comparison as the templates see it, its
figures (numbered, captioned, not drawn yet) and the paper exports (CSV and LaTeX tables, the figures' SVG and PDF
files) by the names they will have.

The report draws the plan (``_render``); the dashboard shows a campaign's page from the plan at once and draws its
figures after the page, when the browser asks for them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from honestscale.report import _figures, _layouts
from honestscale.report._model import ComparisonModel, Model
from honestscale.report._numbers import numbers_tex
from honestscale.report._tables import (
    _slug,
    framework_tables,
    framework_values,
    latex_table,
    results_tables,
    results_values,
)
from honestscale.report._units import unit_for
from honestscale.spreadsheet import to_csv
from honestscale.view import kind_words

RUN_HEADER = ["run", "purpose", "status", "workers", "global batch", "time [s]", "accelerator-hours", "final quality",
              "split", "config hash", "energy to train [J]", "node-hours (CPU only)", "core-hours (CPU only)"]  # fmt: skip
RUN_TEX_COLUMNS = (0, 1, 2, 3, 5, 7)  # six columns fit one column of a paper; the CSV has them all


@dataclass
class ScalingView:
    """A scaling comparison as the templates see it."""

    c: ComparisonModel
    anchor: str
    figures: list[dict[str, Any]]

    def __getattr__(self, name: str) -> Any:
        return getattr(self.c, name)

    @property
    def unit(self) -> tuple[str, float]:
        return unit_for([t for p in self.c.points for t in (p.time_s, p.tta_s, p.mlperf_score_s, *p.time_ci)])

    @property
    def has_tta(self) -> bool:
        return any(p.tta_s is not None for p in self.c.points)

    @property
    def has_mlperf(self) -> bool:
        return any(p.mlperf_score_s is not None for p in self.c.points)

    @property
    def has_official(self) -> bool:
        """Whether a point has an official MLPerf score (a scaling.json factor) beside its olympic mean."""
        return any(p.mlperf_official_s is not None for p in self.c.points)


@dataclass
class Plan:
    """A report's contents by name: the comparisons' views, the figures to draw and the tables to write."""

    scaling: list[ScalingView] = field(default_factory=list)
    frameworks: list[ScalingView] = field(default_factory=list)
    layouts: list[ScalingView] = field(default_factory=list)
    figures: list[_figures.Planned] = field(default_factory=list)
    tables: list[tuple[str, Callable[[], str]]] = field(default_factory=list)  # file name, its text

    @property
    def exports(self) -> list[str]:
        """Every file the report writes beside it: each figure as PDF and SVG, each table."""
        return [f"{stem}.{ext}" for stem, _, _ in self.figures for ext in ("pdf", "svg")] + [
            n for n, _ in self.tables
        ]


def _table_files(plan: Plan, stem: str, header: list[str], rows: list[list[str]], title: str) -> None:
    plan.tables.append((f"{stem}.tex", functools.partial(latex_table, header, rows, title)))


def plan(model: Model) -> Plan:
    """What the report of ``model`` holds; cheap (no figure is drawn, no file written)."""
    out = Plan()
    figure_numbers = iter(range(1, 10_000))
    kinds = (
        (_figures.planned, results_tables, results_values, "table", "cmp", "{label}: {mode} scaling, {part}",
         "scaling", out.scaling),
        (_figures.planned_frameworks, framework_tables, framework_values, "frameworks", "fw",
         "{label}: frameworks, {part}", "framework", out.frameworks),
    )  # fmt: skip
    for figures, tables, values, prefix, anchor, caption, kind, views in kinds:
        for i, c in enumerate([c for c in model.comparisons if c.kind == kind], start=1):
            figs = []
            for stem, text, draw in figures(c, i):
                figs.append({"name": stem, "caption": text, "number": next(figure_numbers)})
                out.figures.append((stem, text, draw))
            csvs = {part: (header, rows) for part, header, rows in values(c)}
            for part, header, rows in tables(c):
                stem = f"{prefix}{i}-{part}-{_slug(c.label)}"
                out.tables.append((f"{stem}.csv", functools.partial(to_csv, *csvs[part])))
                _table_files(
                    out, stem, header, rows, caption.format(label=c.label, mode=kind_words(c.mode), part=part)
                )
            views.append(ScalingView(c, f"{anchor}-{i}", figs))
    for i, c in enumerate([c for c in model.comparisons if c.kind == "layout" and c.layouts], start=1):
        assert c.layouts is not None
        stem = f"layouts{i}-{_slug(c.label)}"
        ((_, header, rows),) = _layouts.values(c.layouts)
        out.tables.append((f"{stem}.csv", functools.partial(to_csv, header, rows)))
        for part, header, rows in _layouts.tables(c.layouts):
            _table_files(out, f"{stem}-{part}", header, rows, f"{c.label}: layouts, {part}")
        out.layouts.append(ScalingView(c, f"lay-{i}", []))
    run_rows = [[r.run_id, r.purpose or "", r.status or "", str(r.workers or ""), str(r.global_batch or ""),
                 "" if r.time_s is None else f"{r.time_s:.1f}",
                 "" if r.accelerator_hours is None else f"{r.accelerator_hours:.3f}",
                 "" if r.accuracy is None else f"{r.accuracy:.4f}", r.split or "", r.config_hash or "",
                 "" if r.energy_j is None else f"{r.energy_j:.1f}",
                 "" if r.node_hours is None else f"{r.node_hours:.6g}", "" if r.core_hours is None else f"{r.core_hours:.6g}"]
                for r in model.runs]  # fmt: skip
    out.tables.append(("runs.csv", functools.partial(to_csv, RUN_HEADER, run_rows)))
    _table_files(out, "runs", [RUN_HEADER[k] for k in RUN_TEX_COLUMNS],
                 [[row[k] for k in RUN_TEX_COLUMNS] for row in run_rows], "All runs")  # fmt: skip
    out.tables.append(("numbers.tex", functools.partial(numbers_tex, model)))  # every number as a macro
    return out
