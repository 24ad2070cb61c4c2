"""The paper-ready scaling report: analysis model -> Jinja2 templates + matplotlib figures -> HTML -> PDF.

``honestscale report`` (or :func:`report`) reads the one view of the store (``honestscale.view``) and the
linter's verdicts about it, builds the analysis model (:mod:`honestscale.report._model`: every number, also printed by
``--format json``), renders one template per section (``templates/``) with the figures as vector
graphics, writes the paper exports (tables as CSV and LaTeX booktabs, figures as PDF and SVG) and
prints the PDF with WeasyPrint.
"""

from __future__ import annotations

from pathlib import Path

from honestscale.compare import Check, Result
from honestscale.lint import LintResult, Suppression, lint
from honestscale.report._figures import PARTS, STYLE, mark, tip, to_svg
from honestscale.report._model import ClaimRow, ComparisonModel, Model, build
from honestscale.report._numbers import TexNumber, numbers, numbers_tex, read_numbers_tex
from honestscale.report._overview import Overview, overview, write_overview
from honestscale.report._plan import Plan, plan
from honestscale.report._render import Outputs, check_targets, render
from honestscale.report._tables import latex_escape
from honestscale.report._text import environment
from honestscale.report._versus import PairView, compare_report, pair_views
from honestscale.report._versus import context as compare_context
from honestscale.store import is_lake, resolve_store_path
from honestscale.view import View


def analyse(view: View, campaign: str | None = None, suppressions: list[Suppression] | None = None,
            path_root: Path | None = None, result: LintResult | None = None,
            forecasts: bool = True) -> tuple[Model, LintResult]:  # fmt: skip
    """The analysis model of the view, with the lint result it carries (``result``, the judged model's, else made
    here): one reading of the runs for both. Event files and command lines are shown relative to ``path_root``
    (the store's folder, or ``--path-root``); ``forecasts=False`` leaves out each series' predictions (a claim's
    context quotes none)."""
    result = result if result is not None else lint(view, suppressions=suppressions or [])
    return build(view, result, campaign, path_root, forecasts), result


def report(view: View, *, pdf: Path | None, html: Path | None = None, campaign: str | None = None,
           assets: Path | None = None, suppressions: list[Suppression] | None = None,
           path_root: Path | None = None, claims: tuple[str, list[ClaimRow]] | None = None,
           result: LintResult | None = None) -> Outputs:  # fmt: skip
    """``claims``: a claims file's name and its claims judged, for the report's Claims section."""
    model, _ = analyse(view, campaign, suppressions, path_root, result)
    if claims is not None:
        model.claims_file, model.claims = claims[0], list(claims[1])
    target = pdf or html or Path("report.pdf")
    return render(model, pdf, html, assets or assets_for(target))


def several_campaigns(view: View) -> bool:
    """Whether the view holds runs of more than one campaign (runs without one count as one): a report of it is
    an overview unless every campaign is asked for in full."""
    return len({r.campaign for r in view.runs}) > 1


def report_overview(view: View, *, pdf: Path | None, html: Path | None = None,
                    suppressions: list[Suppression] | None = None,
                    result: LintResult | None = None) -> tuple[Overview, list[str]]:  # fmt: skip
    """The overview of a store of several campaigns, written as PDF and/or HTML (``<name>_files/campaigns.csv``)."""
    got = overview(view, result if result is not None else lint(view, suppressions=suppressions or []))
    target = pdf or html or Path("report.pdf")
    return got, write_overview(got, pdf=pdf, html=html, assets=assets_for(target))


def path_root_of(store: str | Path | None, path_root: Path | None) -> Path:
    """The folder published paths are shown relative to: ``--path-root``, else the store's folder (a DuckLake
    store has none: the current folder)."""
    if path_root is None and is_lake(str(resolve_store_path(store))):
        return Path.cwd()
    return (path_root or resolve_store_path(store).parent).absolute()


def assets_for(target: Path) -> Path:
    """The folder beside a report for its figures and tables: ``<name>_files``."""
    return target.with_name(target.stem + "_files")


__all__ = [
    "PARTS",
    "STYLE",
    "Check",
    "ClaimRow",
    "ComparisonModel",
    "Model",
    "Outputs",
    "Overview",
    "PairView",
    "Plan",
    "Result",
    "TexNumber",
    "analyse",
    "assets_for",
    "check_targets",
    "compare_context",
    "compare_report",
    "environment",
    "latex_escape",
    "mark",
    "numbers",
    "numbers_tex",
    "overview",
    "pair_views",
    "path_root_of",
    "plan",
    "read_numbers_tex",
    "render",
    "report",
    "report_overview",
    "several_campaigns",
    "tip",
    "to_svg",
    "write_overview",
]  # fmt: skip
