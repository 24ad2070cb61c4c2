"""The overview of a store of several campaigns: what ``honestscale report`` writes without ``--campaign`` (and
without ``--all``). Nobody reads every campaign's report glued together; a centre reads one line per campaign and
one table across them, each number with the rules about exactly its runs, and asks for a campaign's report.

Every number is the analysis model's (``_model.build`` over the whole view: one reading of the runs), only chosen:
per campaign its runs (every one counted, by status), its scaling series' headline (the largest worker count
against the base case, with the 95 % interval and the rules about both points' runs), the rules failing on its
runs and its cost; across campaigns, each setup that two or more campaigns ran, with the lowest and the highest
campaign's throughput named.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import honestscale
from honestscale.analysis.points import FindingRecord, Point, lint_codes
from honestscale.analysis.stats import RATE_STATISTIC, RATIO_METHOD, TIME_STATISTIC
from honestscale.lint import LintResult
from honestscale.report._model import ComparisonModel, RuleVerdict, _clean, totals
from honestscale.report._model import build as build_model
from honestscale.report._render import publish, staged
from honestscale.spreadsheet import to_csv
from honestscale.view import Comparison, View

SETUP = ("model", "dataset", "framework", "accelerator", "workers", "global_batch_size")


@dataclass
class Headline:
    """A scaling series of one campaign: its largest worker count against its base case."""

    series: str  # model / framework (dataset)
    mode: str | None
    metric: str
    base: Point
    last: Point
    hardware_note: str | None = None  # its points ran on different accelerator models (the series says so)


@dataclass
class CampaignRow:
    campaign: str | None  # None: runs without a campaign (MLPerf logs, files ingested without one)
    first: float | None  # the first run's start (epoch seconds)
    last: float | None  # the last run's stop
    runs: int
    by_status: dict[str, int]  # every run counted: success, aborted, incomplete...
    models: list[str]
    frameworks: list[str]
    workers: list[int]
    headlines: list[Headline]
    lint: dict[str, list[str]]  # the rules failing / unverifiable on its runs
    cost: dict[str, object]


@dataclass
class AcrossRow:
    """One setup that two or more campaigns ran: the campaigns' throughput (harmonic mean of each one's runs)."""

    setup: dict[str, object]
    campaigns: int
    runs: int
    lowest: tuple[str, float] | None  # (campaign, samples/s)
    highest: tuple[str, float] | None
    lint: dict[str, list[str]]


@dataclass
class Overview:
    title: str
    generated_by: str
    runs: int
    superseded: int
    campaigns: list[CampaignRow]
    across: list[AcrossRow]
    verdicts: list[RuleVerdict]  # per rule over the whole store, as the full report's
    errors: int
    statistics: dict[str, str] = field(default_factory=dict)

    def as_json(self) -> dict[str, object]:
        out: dict[str, object] = _clean(asdict(self))
        out["schema"] = "honestscale.overview/1"
        return out


def _series_name(c: Comparison) -> str:
    return f"{c.key.get('model')} / {c.key.get('framework')} ({c.key.get('dataset')})"


def _headline(c: Comparison, m: ComparisonModel) -> Headline | None:
    if len(m.points) < 2:
        return None
    return Headline(_series_name(c), m.mode, m.metric, m.points[0], m.points[-1], m.hardware_note)


def _across(view: View, models: dict[str, ComparisonModel], findings: list[FindingRecord]) -> list[AcrossRow]:
    setups: dict[tuple[Any, ...], list[tuple[Comparison, ComparisonModel]]] = defaultdict(list)
    for c in view.of_kind("config"):
        setups[tuple(c.key.get(k) for k in SETUP)].append((c, models[c.id]))
    out = []
    for key, got in sorted(setups.items(), key=lambda kv: repr(kv[0])):
        if len({c.key.get("campaign") for c, _ in got}) < 2:
            continue
        rates = [(str(c.key.get("campaign")), m.points[0].throughput) for c, m in got if m.points]
        known = [(name, rate) for name, rate in rates if rate is not None]
        run_ids = {r.id for c, _ in got for r in c.runs}
        out.append(AcrossRow(
            dict(zip(SETUP, key, strict=True)), len(got), len(run_ids),
            min(known, key=lambda x: x[1]) if known else None, max(known, key=lambda x: x[1]) if known else None,
            lint_codes(findings, run_ids),
        ))  # fmt: skip
    return out


def overview(view: View, result: LintResult) -> Overview:
    """The overview of the view's campaigns, from the analysis model of the whole view."""
    model = build_model(view, result, None)
    findings = model.lint["findings"]
    models = {m.id: m for m in model.comparisons}
    by_campaign: dict[str | None, list[Any]] = defaultdict(list)
    for r in view.runs:
        by_campaign[r.campaign].append(r)
    rows = []
    for name, runs in sorted(by_campaign.items(), key=lambda kv: (kv[0] is None, kv[0] or "")):
        status: dict[str, int] = defaultdict(int)
        for r in runs:
            status[r.status or "unknown"] += 1
        series = [c for c in view.of_kind("scaling") if c.key.get("campaign") == name]
        heads = [h for c in series if (h := _headline(c, models[c.id])) is not None]
        starts = [r.started_at for r in runs if r.started_at is not None]
        stops = [r.stopped_at for r in runs if r.stopped_at is not None]
        rows.append(CampaignRow(
            name, min(starts, default=None), max(stops, default=None), len(runs), dict(sorted(status.items())),
            sorted({str(r.model) for r in runs if r.model}), sorted({str(r.framework) for r in runs if r.framework}),
            sorted({r.workers for r in runs if r.workers}), heads, lint_codes(findings, {r.id for r in runs}),
            totals(runs),
        ))  # fmt: skip
    return Overview(
        title=f"Store overview: {len(rows)} campaigns, {len(view.runs)} runs",
        generated_by=f"honestscale {honestscale.__version__}",
        runs=len(view.runs),
        superseded=len(view.superseded),
        campaigns=rows,
        across=_across(view, models, findings),
        verdicts=model.lint["verdicts"],
        errors=model.lint["errors"],
        statistics={"time": TIME_STATISTIC, "throughput": RATE_STATISTIC, "ratio_ci": RATIO_METHOD},
    )


def _csv(o: Overview) -> tuple[list[str], list[list[str]]]:
    header = ["campaign", "runs", "succeeded", "series", "mode", "base workers", "workers", "speedup", "speedup low",
              "speedup high", "metric", "throughput speedup", "low", "high", "rules failing", "rules unverifiable"]  # fmt: skip

    def f(v: float | None) -> str:
        return "" if v is None else f"{v:.6g}"

    rows = []
    for c in o.campaigns:
        heads: list[Headline | None] = list(c.headlines) or [None]
        for h in heads:
            p = h.last if h else None
            rows.append([c.campaign or "", str(c.runs), str(c.by_status.get("success", 0)), h.series if h else "",
                         (h.mode or "") if h else "", str(h.base.workers) if h else "", str(p.workers) if p else "",
                         f(p.speedup if p else None), f(p.speedup_ci[0] if p else None),
                         f(p.speedup_ci[1] if p else None), h.metric if h else "",
                         f(p.throughput_speedup if p else None), f(p.throughput_speedup_ci[0] if p else None),
                         f(p.throughput_speedup_ci[1] if p else None), " ".join((p.ratio_lint if p else c.lint)["fail"]),
                         " ".join((p.ratio_lint if p else c.lint)["cannot_verify"])])  # fmt: skip
    return header, rows


def write_overview(o: Overview, *, pdf: Path | None, html: Path | None, assets: Path) -> list[str]:
    """The overview as PDF and/or HTML, with ``<name>_files/campaigns.csv``; whole or not at all. Returns the URLs
    the fetcher refused."""
    with staged(pdf, html, assets) as (staging, partials):
        (staging / "campaigns.csv").write_text(to_csv(*_csv(o)), encoding="utf-8")
        return publish("overview.html.j2", {"o": o}, "overview.html", staging=staging, pdf=pdf, html=html,
                       assets=assets, partials=partials, figures="-")  # fmt: skip
