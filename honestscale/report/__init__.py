"""The paper-ready scaling report: analysis model -> Jinja2 templates + matplotlib figures -> HTML -> PDF.

``honestscale report`` (or :func:`report`) reads the store through ``honestscale.store.queries``
and the linter, builds the analysis model (:mod:`honestscale.analysis.report_model`: every number, also printed by
``--format json``), renders one template per section (``templates/``) with the figures as vector
graphics, writes the paper exports (tables as CSV and LaTeX booktabs, figures as PDF and SVG) and
prints the PDF with WeasyPrint.
"""

from __future__ import annotations

from pathlib import Path

from honestscale.analysis.report_model import Model, build
from honestscale.lint import LintResult, Suppression, lint
from honestscale.lint import build as build_view
from honestscale.report._render import Outputs, render
from honestscale.store import Connection


def analyse(con: Connection, campaign: str | None = None,
            suppressions: list[Suppression] | None = None) -> tuple[Model, LintResult]:  # fmt: skip
    view = build_view(con, campaign)  # once: the lint and the model read the same view
    result = lint(con, campaign=campaign, suppressions=suppressions or [], view=view)
    return build(con, view, result, campaign), result


def report(con: Connection, *, pdf: Path | None, html: Path | None = None, campaign: str | None = None,
           assets: Path | None = None, suppressions: list[Suppression] | None = None) -> Outputs:  # fmt: skip
    model, _ = analyse(con, campaign, suppressions)
    target = pdf or html or Path("report.pdf")
    folder = assets or target.with_name(target.stem + "_files")
    return render(model, pdf, html, folder)


__all__ = ["Model", "Outputs", "analyse", "report"]
