"""One judged model behind every command and page: the recipe every reading command shared, written once.

``judged(store, campaign)`` opens the store read-only, checks the selection (a campaign that is not there is named
with the close ones), builds the view (``honestscale.view``: one reading of the runs) and closes the store; the
``Judged`` it returns holds no connection. The lint result and the numbers built on it are made when first asked
for: ``runs`` and ``show`` never pay for what they do not print, and every command that prints a verdict prints the
one lint made of this view. ``read(con, campaign)`` does the same on a connection a caller already holds (the
dashboard's, a campaign's).

An architecture test keeps it so: the view is built and the rules run here (and, for the pairs it makes, in
``compare``), nowhere else.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from honestscale.analysis import forecast
from honestscale.analysis.points import Findings, SummaryRow, summary
from honestscale.analysis.prediction import DRAWS
from honestscale.lint import LintResult, Suppression, lint, load_config
from honestscale.store import Connection, open_store, queries, resolve_store_path
from honestscale.view import View, build, kind_words, layout_text, listed_runs

from ._listing import UNREACHED, Listing, Reached, Target, listed
from ._run import (
    FIELDS,
    STEP_COLUMNS,
    RunRecord,
    SeriesPoint,
    Verdicts,
    energy_text,
    extremes,
    num,
    run_record,
    steady_text,
    step_shares,
    verdicts,
)


@dataclass
class Judged:
    """The view of a selection and, once asked for, the rules' verdicts about it and the numbers they mark."""

    view: View
    campaign: str | None
    suppressions: tuple[Suppression, ...] = ()
    _selected: dict[tuple[tuple[str, ...], tuple[str, ...]], LintResult] = field(
        default_factory=dict, repr=False
    )

    @cached_property
    def lint(self) -> LintResult:
        """Every rule over the view, with the campaign's suppressions."""
        return lint(self.view, suppressions=list(self.suppressions))

    def lint_of(self, select: Iterable[str] | None = None, ignore: Iterable[str] | None = None) -> LintResult:
        """Only the rules ``select`` names, less those ``ignore`` names (``lint --select/--ignore``)."""
        key = (tuple(select or ()), tuple(ignore or ()))
        if key == ((), ()):
            return self.lint
        if key not in self._selected:
            self._selected[key] = lint(
                self.view, select=select, ignore=ignore, suppressions=list(self.suppressions)
            )
        return self._selected[key]

    @cached_property
    def findings(self) -> Findings:
        """The lint's findings as JSON, indexed by run and comparison: what every number's verdicts are read from."""
        return Findings(f.as_json() for f in self.lint.findings)

    def summary(self) -> list[SummaryRow]:
        """``honestscale summary``'s rows: per campaign, model, framework and worker count."""
        return summary(self.view, self.findings)

    def forecast(self, at: list[int] | None = None, draws: int = DRAWS) -> list[forecast.SeriesForecast]:
        """Every scaling series predicted at ``at`` (``honestscale predict``)."""
        return forecast.forecast(self.view, self.findings, at, draws)

    def pooling(self) -> Judged:
        """The same selection with one setup's runs pooled across campaigns (``--pool``)."""
        return Judged(self.view.pooling(), self.campaign, self.suppressions)


def read(con: Connection, campaign: str | None = None, *, suppressions: Sequence[Suppression] = ()) -> Judged:
    """The judged model of ``campaign`` (every run where None) on a connection the caller holds."""
    queries.check_campaign(con, campaign)
    return Judged(build(con, campaign), campaign, tuple(suppressions))


def judged(
    store: str | Path | None,
    campaign: str | None = None,
    *,
    suppressions: Sequence[Suppression] = (),
    wait: float = 10.0,
    on_wait: Callable[[str], None] | None = None,
) -> Judged:
    """The judged model of ``campaign`` in ``store``: the store opened read-only (waiting up to ``wait`` seconds for
    a writer, saying so through ``on_wait``), read once and closed before anything is judged."""
    con = open_store(store, read_only=True, wait_s=wait, on_wait=on_wait)
    try:
        return read(con, campaign, suppressions=suppressions)
    finally:
        con.close()


def run_of(con: Connection, run_id: str, *, suppressions: Sequence[Suppression] = ()) -> RunRecord:
    """The record of one run (a full id), judged with its campaign; a run of no campaign with the store's other
    runs of none, as ``honestscale lint`` judges it (``show``)."""
    campaign = queries.run(con, run_id)["campaign"][0]
    return run_record(con, run_id, read(con, campaign, suppressions=suppressions))


__all__ = [
    "FIELDS",
    "STEP_COLUMNS",
    "UNREACHED",
    "Findings",
    "Judged",
    "Listing",
    "Reached",
    "RunRecord",
    "SeriesPoint",
    "Target",
    "Verdicts",
    "View",
    "energy_text",
    "extremes",
    "judged",
    "kind_words",
    "layout_text",
    "listed",
    "listed_runs",
    "load_config",
    "num",
    "read",
    "resolve_store_path",
    "run_of",
    "run_record",
    "steady_text",
    "step_shares",
    "verdicts",
]
