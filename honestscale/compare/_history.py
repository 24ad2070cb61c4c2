"""One setup followed across campaigns in time (as asv follows a benchmark across commits): each campaign's median
with its interval, and a change point only where a campaign differs significantly from the one before it, with what
changed in the setup and the rules' verdicts about each campaign's runs beside it."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from honestscale.analysis.points import Findings, lint_codes
from honestscale.analysis.scaling import times
from honestscale.analysis.stats import Difference, Estimate, centre_of_times, differ, median_ci, ratio
from honestscale.compare._measures import time_measure
from honestscale.compare._pairs import PAIRED, differences, name, setup_fields
from honestscale.compare._pairs import Difference as Changed
from honestscale.compare._result import SCHEMA, in_context, select_side
from honestscale.compare._select import parse, value_of
from honestscale.lint import lint
from honestscale.view import Run, View


@dataclass
class Point:
    campaign: str
    started_at: float | None
    runs: list[Run]
    values: list[float]
    centre: float | None
    ci: tuple[float | None, float | None]
    verdicts: dict[str, list[str]]
    # against the campaign before it
    ratio: Estimate | None = None
    difference: Difference | None = None
    changed: tuple[Changed, ...] = ()

    @property
    def change_point(self) -> bool:
        return self.difference is not None and self.difference.significant

    def as_json(self) -> dict[str, object]:
        d, r = self.difference, self.ratio
        return {"campaign": self.campaign, "started_at": self.started_at, "runs": sorted(x.id for x in self.runs),
                "runs_ok": len(self.values), "values": self.values, "median": self.centre, "ci": list(self.ci),
                "ratio_to_previous": None if r is None else {"value": r.value, "low": r.low, "high": r.high},
                "p_value": None if d is None else d.p_value, "change_point": self.change_point,
                "verdict": None if d is None else d.verdict, "sentence": None if d is None else d.describe(),
                "changed": [c.as_json() for c in self.changed], "verdicts": self.verdicts}  # fmt: skip


@dataclass
class Series:
    setup: str
    measure: str
    points: list[Point]

    def as_json(self) -> dict[str, object]:
        return {"setup": self.setup, "measure": self.measure, "unit": "s", "statistic": "median of runs",
                "points": [p.as_json() for p in self.points]}  # fmt: skip


def history(view: View, setup: str) -> list[Series]:
    """Every series the selector ``setup`` holds (one per pairing key), campaign by campaign in time."""
    selector = parse(setup, view.runs)
    left_out: dict[str, list[str]] = {}
    runs = select_side(view, selector, "the setup", left_out)
    result = lint(in_context(view, runs))
    findings = Findings(f.as_json() for f in result.findings)
    fields = setup_fields(runs)
    groups: dict[tuple[str, ...], list[Run]] = defaultdict(list)
    for r in runs:
        groups[tuple(str(value_of(r, k)) for k in PAIRED)].append(r)
    out = []
    for key, group in sorted(groups.items()):
        metric = time_measure(group)
        by_campaign: dict[str, list[Run]] = defaultdict(list)
        for r in group:
            by_campaign[r.campaign or "(no campaign)"].append(r)
        points: list[Point] = []
        for campaign, members in sorted(
            by_campaign.items(), key=lambda kv: (min(r.started_at or 0 for r in kv[1]), kv[0])
        ):
            values = times(members, metric)
            p = Point(campaign, min((r.started_at for r in members if r.started_at), default=None), members,
                      values, centre_of_times(values), median_ci(values), lint_codes(findings, {r.id for r in members}))  # fmt: skip
            if points and values and points[-1].values:
                prev = points[-1]
                p.ratio = ratio(values, prev.values, "median")
                p.difference = differ(values, prev.values, "median", p.ratio)
                p.changed = tuple(differences(prev.runs, members, fields))
            points.append(p)
        label = " ".join(f"{name(k)}={v}" for k, v in zip(PAIRED, key, strict=True))
        out.append(Series(label, metric, points))
    return out


def as_json(setup: str, series: Sequence[Series]) -> dict[str, object]:
    return {"schema": SCHEMA, "history": setup, "series": [s.as_json() for s in series]}
