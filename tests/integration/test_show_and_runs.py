"""What ``show`` and ``runs`` print about a run carries the rules' verdicts about it, and no count a run did not have."""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
from pathlib import Path
from typing import Any

import duckdb
import pytest

from honestscale.store._database import migrations
from tests.conftest import EXAMPLE, cli

CAMPAIGN = "digits-ddp-example"


@pytest.fixture(scope="module")
def example_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("show") / "s.duckdb"
    got = cli("ingest", EXAMPLE, "--store", store)
    assert got.returncode == 0, got.stderr
    return store


def _about(findings: list[dict[str, Any]], run_id: str) -> list[tuple[Any, ...]]:
    return sorted((f["code"], f["outcome"], f["comparison"], f["message"]) for f in findings
                  if run_id in (f["runs"] or []))  # fmt: skip


def test_show_carries_the_verdicts_the_run_page_shows(example_store: Path) -> None:
    """The dashboard's run page lists its campaign's findings that name the run (the report model's lint): show,
    as text and JSON, lists the same ones, each with its code, outcome and fix."""
    model = json.loads(cli("report", "--store", example_store, "--campaign", CAMPAIGN, "-f", "json").stdout)
    runs = json.loads(cli("runs", "--store", example_store, "-f", "json").stdout)
    for run in (runs[0], runs[-1]):
        rid = run["run_id"]
        shown = json.loads(cli("show", rid, "--store", example_store, "-f", "json").stdout)
        verdicts = shown["verdicts"]
        assert verdicts["judged_with"] == f"its campaign {CAMPAIGN}"
        expected = _about(model["lint"]["findings"], rid)
        assert expected, "the example's runs have findings (HS202: two runs a point)"
        assert _about(verdicts["findings"], rid) == expected
        text = cli("show", rid, "--store", example_store)
        assert text.returncode == 0, text.stderr
        head = text.stdout.split("run_id", 1)[0]  # the verdicts come first, as on the run page
        assert (
            f"verdicts on this run ({len(expected)} finding(s), judged with its campaign {CAMPAIGN})" in head
        )
        for f in verdicts["findings"]:
            assert f"{f['code']} " in head and f["fix"][:40] in head


def test_show_judges_a_run_of_no_campaign_as_lint_does(mlperf: Path, tmp_path: Path) -> None:
    store = tmp_path / "s.duckdb"
    assert cli("ingest", mlperf / "Google", "--store", store).returncode == 0  # no --campaign: runs of none
    linted = json.loads(cli("lint", "--store", store, "-f", "json").stdout)
    rid = json.loads(cli("runs", "--store", store, "-f", "json").stdout)[0]["run_id"]
    verdicts = json.loads(cli("show", rid, "--store", store, "-f", "json").stdout)["verdicts"]
    assert verdicts["judged_with"] == "the store's runs of no campaign"
    assert _about(verdicts["findings"], rid) == _about(linted, rid) != []


def test_runs_never_print_a_time_hs213_rejects_as_a_measurement(tmp_path: Path) -> None:
    """run_stop 22 s before run_start, and a clock stepping 500 s back (real events, written and ingested): the
    table marks their times "✗ HS213" and says why under it; JSON and CSV withhold them (null, empty) and give
    them under "rejected" with the rule and its reason; the sound runs are untouched."""
    from tests.lint_campaigns import build

    runs = [{"id": "ok", "workers": 1, "reps": 2, "ttt": 3600.0},
            {"id": "back", "workers": 1, "reps": 1, "ttt": 3600.0, "stop_at": -22.0},
            {"id": "ntp", "workers": 1, "reps": 1, "ttt": 3600.0, "clock_back": 500.0}]  # fmt: skip
    store = build(tmp_path, {"runs": runs})
    table = cli("runs", "--store", store)
    assert table.returncode == 0, table.stderr
    row = next(line for line in table.stdout.splitlines() if "back-w1-r0" in line)
    assert "-22.00 s ✗ HS213" in row
    assert "1.00 h ✗ HS213" in next(line for line in table.stdout.splitlines() if "ntp-w1-r0" in line)
    assert "✗ HS213" not in next(line for line in table.stdout.splitlines() if "ok-w1-r0" in line)
    assert "run_stop is 22.0 s before run_start" in table.stdout.split("└", 1)[1]
    records = {r["run_id"]: r for r in json.loads(cli("runs", "--store", store, "-f", "json").stdout)}
    back, ntp, ok = records["back-w1-r0"], records["ntp-w1-r0"], records["ok-w1-r0"]
    assert back["time_to_train_s"] is None and back["time_to_accuracy_s"] is None
    assert back["rejected"]["rule"] == "HS213" and back["rejected"]["time_to_train_s"] == -22.0
    assert "run_stop is 22.0 s before run_start" in back["rejected"]["reason"]
    assert ntp["time_to_train_s"] is None and "clock went backwards" in ntp["rejected"]["reason"]
    assert ok["time_to_train_s"] == 3600.0 and ok["rejected"] is None
    rows = {
        r["run_id"]: r for r in csv.DictReader(io.StringIO(cli("runs", "--store", store, "-f", "csv").stdout))
    }
    assert rows["back-w1-r0"]["time_to_train_s"] == "" and rows["back-w1-r0"]["time_to_accuracy_s"] == ""
    assert rows["back-w1-r0"]["rejected"].startswith("HS213: run_stop is 22.0 s before run_start")
    assert "time to train -22 s" in rows["back-w1-r0"]["rejected"]
    assert rows["ok-w1-r0"]["time_to_train_s"] == "3600.0" and rows["ok-w1-r0"]["rejected"] == ""
    shown = cli("show", "back-w1-r0", "--store", store).stdout
    assert "-22.000 s (-22.00 s) ✗ HS213" in shown


def test_a_cpu_run_has_no_accelerators_anywhere(example_store: Path, tmp_path: Path) -> None:
    """The example's CPU runs (run_start: 0 accelerators per node) said "n_accelerators 2" beside
    "accelerators_per_node 0": now 0 in runs (JSON, CSV), "none (CPU)" in the table and 0 in show, their workers
    still counted (world_size, summary); a store from before is mended by its migration."""
    runs = json.loads(cli("runs", "--store", example_store, "-f", "json").stdout)
    assert sorted((r["world_size"], r["n_accelerators"]) for r in runs) == [(1, 0), (1, 0), (2, 0), (2, 0)]
    rows = list(csv.DictReader(io.StringIO(cli("runs", "--store", example_store, "-f", "csv").stdout)))
    assert {r["n_accelerators"] for r in rows} == {"0"}
    table = cli("runs", "--store", example_store).stdout
    assert table.count("none (CPU)") == 4 and "CPU worker" not in table
    shown = cli("show", "2w-r0", "--store", example_store).stdout
    assert re.search(r"accelerators_per_node +0\b", shown) and re.search(r"n_accelerators +0\b", shown)
    assert re.search(r"world_size +2\b", shown)
    summary = json.loads(cli("summary", "--store", example_store, "-f", "json").stdout)
    assert sorted(p["workers"] for p in summary) == [1, 2]
    # a store written before: its CPU runs counted their workers as accelerators; `migrate` mends them
    old = tmp_path / "old.duckdb"
    shutil.copy(example_store, old)
    # as it was before migration 6: the later ones' columns not there yet
    with duckdb.connect(str(old)) as con:
        con.execute("UPDATE runs SET n_accelerators = world_size WHERE accelerators_per_node = 0")
        # before migration 15, events was the table of every event
        con.execute(
            "CREATE TABLE every_event AS SELECT * FROM events; DROP VIEW events; DROP TABLE nonstep_events; "
            "ALTER TABLE every_event RENAME TO events"
        )
        for mig in migrations():
            if mig.version > 6:
                for table, column in re.findall(r"ALTER TABLE (\w+) ADD COLUMN (\w+)", mig.sql):
                    con.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
        con.execute("DELETE FROM schema_version WHERE version >= 6")
    assert cli("migrate", "--store", old).returncode == 0
    assert {r["n_accelerators"] for r in json.loads(cli("runs", "--store", old, "-f", "json").stdout)} == {0}


PAGE_ONLY = ("quarantined", "quarantine", "steps", "stall_steps", "warmup_steps")


def _served_record(store: Path, run_id: str) -> tuple[dict[str, Any], str]:
    """The dashboard's run page of ``run_id`` (its JSON and its HTML), from ``honestscale serve`` on ``store``."""
    from urllib.parse import quote

    from tests.serving import start, stop

    server = start(store)
    try:
        status, body, _ = server.get(f"/api/runs/{quote(run_id, safe='')}")
        assert status == 200, body
        status, html, _ = server.get(f"/runs/{quote(run_id, safe='')}")
        assert status == 200, html
    finally:
        stop(server)
    return json.loads(body), html


def _words(html: str) -> str:
    """The page's text as a reader reads it (tags dropped, entities and spaces folded)."""
    import html as entities

    return " ".join(entities.unescape(re.sub(r"<[^>]+>", " ", html)).split())


@pytest.mark.parametrize("which", ["campaign", "no campaign"])
def test_show_and_the_run_page_give_one_record(
    which: str, example_store: Path, mlperf: Path, tmp_path: Path
) -> None:
    """One record behind both: the run page's JSON is ``show``'s JSON (and the page's own counts), and the numbers
    ``show`` prints (time to train, final quality, energy, steady state, every rank's step split, every verdict)
    are on the page in the same words: for a run of a campaign and for a run of none (judged as ``lint`` judges
    it, never left without verdicts)."""
    if which == "campaign":
        store = example_store
    else:
        store = tmp_path / "s.duckdb"
        assert cli("ingest", mlperf / "Google", "--store", store).returncode == 0
    rid = json.loads(cli("runs", "--store", store, "-f", "json").stdout)[-1]["run_id"]
    shown = json.loads(cli("show", rid, "--store", store, "-f", "json").stdout)
    served, html = _served_record(store, rid)
    assert {k: v for k, v in served.items() if k not in PAGE_ONLY} == shown
    assert shown["verdicts"]["findings"], "the example's runs and MLPerf's have findings"
    page, text = _words(html), cli("show", rid, "--store", store, "--ranks").stdout
    assert f"judged with {shown['verdicts']['judged_with']}" in page
    for f in shown["verdicts"]["findings"]:
        assert f"{f['code']} {f['outcome'].replace('_', ' ')}" in page and f["code"] in text
    if shown["steady_state"] is not None:  # the same sentence in both
        sentence = re.search(r"steady state \(first rank's .*", " ".join(text.split()))
        assert sentence and sentence.group(0)[:60] in page
    cells = [[c.strip() for c in ln.split("│")[1:-1]] for ln in text.splitlines() if ln.count("│") > 9]
    for row in shown["step_breakdown"]:  # every rank's shares, as the text table prints them
        printed = next(c for c in cells if c[0] == str(row["rank"]))
        assert " ".join(printed) in page, printed
    energy = re.search(r"energy_to_train\s+(.*)", text)
    assert energy and energy.group(1).strip()[:30] in page
    if shown["final_accuracy"]:
        assert f"{shown['final_accuracy']['value']:.4g}"[:5] in page
