"""Amdahl's and Gustafson's laws fitted to the quantity each describes (analysis/laws.py), on series written as
events with a known parallel fraction and ingested: the projections fall within their intervals, a weak series is
projected from its scaled speedup, and nothing is projected past what the data can carry."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from honestscale.analysis import laws
from honestscale.analysis.stats import law_efficiency
from honestscale.report import report
from honestscale.view import Comparison
from tests.conftest import hs
from tests.lint_campaigns import build, view_of

NOISE = (1.0, 1.012, 0.991, 1.006, 0.995, 1.009)  # six repetitions, about 1 % apart


def _series(tmp: Path, points: list[dict[str, Any]]) -> Comparison:
    view = view_of(tmp, {"runs": points})
    (series,) = view.of_kind("scaling")
    return series


def test_a_strong_series_with_a_known_parallel_fraction_projects_within_its_interval(tmp_path: Path) -> None:
    p, t1 = 0.9, 36_000.0
    points = [{"id": f"s{n}", "workers": n, "ttt_by_rep": [t1 * ((1 - p) + p / n) * k for k in NOISE]}
              for n in (1, 2, 4)]  # fmt: skip
    series = _series(tmp_path, points)
    assert series.mode == "strong"
    got = laws.fit(series)
    assert got.law == "amdahl" and got.withheld is None and "time to accuracy" in got.quantity
    assert got.interval is not None and got.interval[0] < p < got.interval[1]
    assert got.parallel_fraction == pytest.approx(p, abs=0.02)
    (at8, *_) = got.projected
    low, high = at8["low"], at8["high"]
    assert at8["workers"] == 8 and low is not None and high is not None
    assert low < law_efficiency("amdahl", p, 8) < high
    assert at8["efficiency"] <= got.measured[-1][1] / 4  # no projection above the measured efficiency
    # projected to 2, 4 and 8 times the largest count measured (4), each at the law's own efficiency there
    assert [q["workers"] for q in got.projected] == [8, 16, 32]
    fraction = got.parallel_fraction
    assert fraction is not None
    for q in got.projected:
        assert q["efficiency"] == pytest.approx(law_efficiency("amdahl", fraction, q["workers"]))


def test_a_weak_series_is_projected_from_its_scaled_speedup(tmp_path: Path) -> None:
    """Per-worker efficiency 0.93 at 2 workers, 0.81 at 4 (throughput per worker, the batch per worker constant,
    a fixed number of epochs): Gustafson on the scaled speedup projects 8 workers between 0.5 and 0.9."""
    base_step = 0.05
    points = [{"id": f"w{n}", "workers": n, "global_batch_size": 128 * n, "stop_criterion": "epochs", "stop_value": 5,
               "scaling": "weak", "ttt": 600.0, "step_s_by_rep": [base_step / eff * k for k in NOISE]}
              for n, eff in ((1, 1.0), (2, 0.93), (4, 0.81))]  # fmt: skip
    series = _series(tmp_path, points)
    assert series.mode == "weak"
    got = laws.fit(series)
    assert got.law == "gustafson" and got.withheld is None and "throughput" in got.quantity
    assert [round(s / (w / 1), 2) for w, s in got.measured] == [1.0, 0.93, 0.81]
    (at8, *_) = got.projected
    assert at8["workers"] == 8 and 0.5 < at8["efficiency"] < 0.9
    low, high = at8["low"], at8["high"]
    assert got.interval is not None and low is not None and high is not None
    assert low <= at8["efficiency"] <= high
    assert at8["efficiency"] <= 0.81 + laws.TOLERANCE


def test_a_slowdown_gets_no_law_and_no_zero_width_interval(tmp_path: Path) -> None:
    """The digits job on 2 cores: 2 workers slower than 1. Amdahl would clamp at p = 0 and 'project' 25 % at 4
    workers, above the 13 % measured at 2, with an interval of zero width: nothing is projected, and it says why."""
    points = [{"id": "one", "workers": 1, "ttt_by_rep": [10.0 * k for k in NOISE]},
              {"id": "two", "workers": 2, "ttt_by_rep": [38.0 * k for k in NOISE]}]  # fmt: skip
    store = build(tmp_path, {"runs": points})
    advice = json.loads(hs("advise", "--store", store, "-f", "json").stdout)
    (group,) = advice["groups"]
    assert group["projections"] == []
    (why,) = group["withheld"]
    assert "0.26x at 2 workers: slower than the base case" in why and "strong scaling" in why


def test_a_fit_at_its_bound_projects_nothing(tmp_path: Path) -> None:
    """Perfect scaling (p = 1 within noise): the fit sits at its bound and would project 100 % everywhere."""
    points = [{"id": f"p{n}", "workers": n, "ttt_by_rep": [3600.0 / n * k for k in NOISE]} for n in (1, 2, 4)]
    got = laws.fit(_series(tmp_path, points))
    assert got.withheld is not None and got.projected == []
    assert "bound" in got.withheld or "superlinear" in got.withheld


def test_two_worker_counts_give_the_fraction_they_imply_not_fitted(tmp_path: Path) -> None:
    """1 and 4 workers, p = 0.767 (Amdahl: the 4-worker speedup 1 / (0.233 + 0.767 / 4) = 2.35): one speedup fixes
    p exactly, so no standard error, no interval, no projection, and every output says "not fitted": the law's
    fit, advise (text and JSON) and the report's summary and results (the dashboard's campaign page renders the
    same templates)."""
    p = 0.767
    points = [{"id": f"t{n}", "workers": n, "ttt_by_rep": [3600.0 * ((1 - p) + p / n) * k for k in NOISE]}
              for n in (1, 4)]  # fmt: skip
    store = build(tmp_path, {"runs": points})
    got = laws.fit(_series(tmp_path / "again", points))
    assert not got.fitted and got.parallel_fraction == pytest.approx(p, abs=0.01)
    assert got.stderr is None and got.interval is None and got.projected == []
    advice = json.loads(hs("advise", "--store", store, "-f", "json").stdout)
    (group,) = advice["groups"]
    assert group["projections"] == []
    (said,) = [w for w in group["withheld"] if "parallel fraction" in w]
    assert "not fitted" in said and "standard error" in said and f"p = {got.parallel_fraction:.3f}" in said
    html = tmp_path / "r.html"
    report(view_of(tmp_path / "view", {"runs": points}), pdf=None, html=html)
    page = html.read_text()
    assert page.count("implied by two worker counts, not fitted") >= 2  # summary and results
    assert "standard error" not in page.split("implied by two worker counts")[0].rsplit("p =", 1)[-1]
    assert "± " not in page
