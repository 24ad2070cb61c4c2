"""What ``show`` and ``runs`` print about a run carries the rules' verdicts about it, and no count a run did not have."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import EXAMPLE, hs

CAMPAIGN = "digits-ddp-example"


@pytest.fixture(scope="module")
def example_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("show") / "s.duckdb"
    got = hs("ingest", EXAMPLE, "--store", store)
    assert got.returncode == 0, got.stderr
    return store


def _about(findings: list[dict[str, Any]], run_id: str) -> list[tuple[Any, ...]]:
    return sorted((f["code"], f["outcome"], f["comparison"], f["message"]) for f in findings
                  if run_id in (f["runs"] or []))  # fmt: skip


def test_show_carries_the_verdicts_the_run_page_shows(example_store: Path) -> None:
    """The dashboard's run page lists its campaign's findings that name the run (the report model's lint): show,
    as text and JSON, lists the same ones, each with its code, outcome and fix."""
    model = json.loads(hs("report", "--store", example_store, "--campaign", CAMPAIGN, "-f", "json").stdout)
    runs = json.loads(hs("runs", "--store", example_store, "-f", "json").stdout)
    for run in (runs[0], runs[-1]):
        rid = run["run_id"]
        shown = json.loads(hs("show", rid, "--store", example_store, "-f", "json").stdout)
        verdicts = shown["verdicts"]
        assert verdicts["judged_with"] == f"its campaign {CAMPAIGN}"
        expected = _about(model["lint"]["findings"], rid)
        assert expected, "the example's runs have findings (HS202: two runs a point)"
        assert _about(verdicts["findings"], rid) == expected
        text = hs("show", rid, "--store", example_store)
        assert text.returncode == 0, text.stderr
        head = text.stdout.split("run_id", 1)[0]  # the verdicts come first, as on the run page
        assert (
            f"verdicts on this run ({len(expected)} finding(s), judged with its campaign {CAMPAIGN})" in head
        )
        for f in verdicts["findings"]:
            assert f"{f['code']} " in head and f["fix"][:40] in head


def test_show_judges_a_run_of_no_campaign_as_lint_does(mlperf: Path, tmp_path: Path) -> None:
    store = tmp_path / "s.duckdb"
    assert hs("ingest", mlperf / "Google", "--store", store).returncode == 0  # no --campaign: runs of none
    linted = json.loads(hs("lint", "--store", store, "-f", "json").stdout)
    rid = json.loads(hs("runs", "--store", store, "-f", "json").stdout)[0]["run_id"]
    verdicts = json.loads(hs("show", rid, "--store", store, "-f", "json").stdout)["verdicts"]
    assert verdicts["judged_with"] == "the store's runs of no campaign"
    assert _about(verdicts["findings"], rid) == _about(linted, rid) != []
