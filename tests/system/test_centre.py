"""A store of several campaigns, as a centre's is: advise and summary per campaign, each named, and pooled only when
asked; a report of the store is an overview (one page per campaign at most) unless --all; cost in the unit spent;
time to accuracy and its target in the runs listing. On real runner events (examples/compare: four campaigns of the
digits MLP, CPU only) beside the MLPerf v0.7 submissions (V100s, no campaign)."""

from __future__ import annotations

import csv
import io
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import COMPARE_RUNS, cli, hs

RUNS = COMPARE_RUNS
CAMPAIGNS = ["compare-again", "compare-base", "compare-confounded", "compare-loaders"]


def _json(*args: Any) -> Any:
    got = hs(*args)
    assert got.returncode == 0, got.stderr
    return json.loads(got.stdout)


def _events(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "events-rank0.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def centre(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three campaigns of a centre's store (benchmarks/centre.py: 48 runs each, weak scaling, written with the
    runners' EventWriter; each campaign's steps 3 % slower than the one before)."""
    from benchmarks.centre import write_store

    tmp = tmp_path_factory.mktemp("centre-store")
    assert write_store(tmp / "events", 3, steps=12) == 144
    assert hs("ingest", tmp / "events", "--store", tmp / "s.duckdb", "--quiet").returncode == 0
    return tmp / "s.duckdb"


def test_advise_names_each_campaign_and_pools_only_when_asked(centre: Path) -> None:
    names = ["centre-000", "centre-001", "centre-002"]
    advice = _json("advise", "--store", centre, "-f", "json")
    assert advice["pooled"] == [] and advice["excluded"] == {}
    groups = {g["campaign"]: g for g in advice["groups"]}
    assert list(groups) == names
    for name, g in groups.items():  # each campaign on its own 48 runs: 12 setups of 4, four series projected
        assert g["runs"] == 48 and len(g["setups"]) == 12
        assert all(
            s["runs"] == 4 and all(r.startswith(name[-3:], 1) for r in s["run_ids"]) for s in g["setups"]
        )
        assert sorted((p["model"], p["framework"]) for p in g["projections"]) == [
            (m, f) for m in ("bert", "resnet50") for f in ("tensorflow", "torch")
        ]
        assert {(f["model"], f["framework"], f["workers"]) for f in g["fastest_per_sample"]} == {
            ("bert", "tensorflow", 4),
            ("resnet50", "tensorflow", 4),
        } or all(f["workers"] == 4 for f in g["fastest_per_sample"])
    # the campaigns differ (3 % a step): each one's throughput is its own, not the pool's
    rate = {n: {(s["model"], s["framework"], s["workers"]): s["samples_per_s"] for s in g["setups"]}
            for n, g in groups.items()}  # fmt: skip
    key = ("bert", "torch", 1)
    assert rate["centre-000"][key] > rate["centre-001"][key] > rate["centre-002"][key]
    text = hs("advise", "--store", centre).stdout
    assert "Advice per campaign (3 campaigns" in text and "--pool" in text
    for name in names:
        assert f"Campaign {name} (48 run(s)):" in text

    pooled = hs("advise", "--store", centre, "--pool", "-f", "json")
    got = json.loads(pooled.stdout)
    assert got["pooled"] == names and ", ".join(names) in pooled.stderr
    (group,) = got["groups"]
    assert group["runs"] == 144 and all(s["runs"] == 12 for s in group["setups"])
    (setup,) = [s for s in group["setups"] if (s["model"], s["framework"], s["workers"]) == key]
    # the pooled throughput is the harmonic mean of all 12 runs: from each campaign's (4 runs each)
    assert setup["samples_per_s"] == pytest.approx(12 / sum(4 / rate[n][key] for n in names), rel=1e-9)
    assert len(group["projections"]) == 4 and all(p["campaign"] == "(pooled)" for p in group["projections"])
    assert (
        "Pooled: 144 run(s) of 3 campaigns (centre-000, centre-001, centre-002)"
        in hs("advise", "--store", centre, "--pool").stdout
    )


def test_summary_pools_only_when_asked_and_names_the_campaigns(compare_store: Path) -> None:
    rows = _json("summary", "--store", compare_store, "-f", "json")
    mlp = [r for r in rows if r["model"] == "mlp"]
    assert sorted(r["campaign"] for r in mlp) == CAMPAIGNS and all(r["runs"] == 6 for r in mlp)
    assert all(r["campaigns"] == [r["campaign"]] for r in mlp)
    got = cli("summary", "--store", compare_store, "--pool", "-f", "json")
    (pooled,) = [r for r in json.loads(got.stdout) if r["model"] == "mlp"]
    assert pooled["campaign"] == "(pooled)" and pooled["campaigns"] == CAMPAIGNS and pooled["runs"] == 24
    assert "pooling 4 campaigns" in got.stderr
    one = cli("summary", "--store", compare_store, "--campaign", "compare-base", "--pool")
    assert one.returncode == 0 and "nothing to pool" in one.stderr


def _pdf_text(pdf: Path) -> tuple[int, str]:
    info = subprocess.run(["pdfinfo", str(pdf)], capture_output=True, text=True, check=True).stdout
    pages = int(next(line.split()[-1] for line in info.splitlines() if line.startswith("Pages:")))
    text = subprocess.run(["pdftotext", str(pdf), "-"], capture_output=True, text=True, check=True)
    return pages, " ".join(text.stdout.split())


def test_a_report_of_several_campaigns_is_an_overview_unless_all(compare_store: Path, tmp_path: Path) -> None:
    pdf = tmp_path / "store.pdf"
    got = cli("report", "--store", compare_store, "-o", pdf)
    assert got.returncode == 0, got.stderr
    assert "an overview of 5 campaigns" in got.stderr and "--all" in got.stderr
    pages, text = _pdf_text(pdf)
    assert pages <= 5, pages  # one page per campaign at most
    assert "Store overview: 5 campaigns" in text
    for name in CAMPAIGNS:  # pdftotext drops the hyphen where a name wraps at it
        assert name in text or name.replace("-", "") in text, name
    # cost in the unit spent: the digits runs had no accelerator, the MLPerf submissions V100s
    assert "node-hours" in text and "CPU-only run(s), no accelerator spent" in text
    assert "0.0 accelerator-hours" not in text
    model = _json("report", "--store", compare_store, "-f", "json")
    assert model["schema"] == "honestscale.overview/1" and model["runs"] == 24 + 20
    rows = {c["campaign"]: c for c in model["campaigns"]}
    assert sum(c["runs"] for c in rows.values()) == model["runs"]  # every run counted
    for name in CAMPAIGNS:
        cost = rows[name]["cost"]
        assert cost["cpu_only_runs"] == 6 and cost["accelerator_hours"] == 0 and cost["node_hours"] > 0
    assert rows[None]["cost"]["cpu_only_runs"] == 0 and rows[None]["cost"]["accelerator_hours"] > 0
    (across,) = [a for a in model["across"] if a["setup"]["model"] == "mlp"]  # one setup, four campaigns
    assert across["campaigns"] == 4 and across["runs"] == 24
    assert across["lowest"][1] <= across["highest"][1]
    (dell,) = [h for h in rows[None]["headlines"] if "NGC" in h["series"]]  # the MLPerf series' headline
    series = [c for c in _json("report", "--store", compare_store, "--all", "-f", "json")["comparisons"]
              if c["kind"] == "scaling" and c["runs"] == sorted(c["runs"]) and "NGC" in c["label"]]  # fmt: skip
    assert dell["last"]["speedup"] == pytest.approx(series[0]["points"][-1]["speedup"])
    table = list(csv.reader(io.StringIO((tmp_path / "store_files" / "campaigns.csv").read_text())))
    assert {r[0] for r in table[1:]} == {*CAMPAIGNS, ""}

    full = tmp_path / "all.pdf"
    assert cli("report", "--store", compare_store, "-o", full, "--all").returncode == 0
    full_pages, full_text = _pdf_text(full)
    assert full_pages > pages and "Scaling report" in full_text


def test_runs_list_time_to_accuracy_and_its_target(compare_store: Path) -> None:
    runs = {r["run_id"]: r for r in _json("runs", "--store", compare_store, "-f", "json")}
    for run_dir in sorted(RUNS.iterdir()):
        events = _events(run_dir)
        start = events[0]
        reached = [e["time"] for e in events
                   if e["kind"] == "eval" and e["split"] == "validation" and e["value"] >= start["stop_value"]]  # fmt: skip
        got = runs[start["run_id"]]
        assert got["time_to_accuracy_s"] == pytest.approx(min(reached) - start["time"], abs=1e-6)
        assert got["target"] == [{"split": "validation", "metric": "accuracy", "better": "higher",
                                  "value": start["stop_value"]}]  # fmt: skip
    mlperf = [r for r in runs.values() if r["source"] == "mlperf"]
    assert mlperf and all(r["target"][0]["metric"] == "top1_accuracy" for r in mlperf)
    assert all(
        r["time_to_accuracy_s"] is None or r["time_to_accuracy_s"] <= r["time_to_train_s"] + 1 for r in mlperf
    )
    table = list(csv.DictReader(io.StringIO(cli("runs", "--store", compare_store, "-f", "csv").stdout)))
    row = next(r for r in table if r["run_id"] in runs and runs[r["run_id"]]["source"] == "native")
    assert float(row["time_to_accuracy_s"]) == pytest.approx(runs[row["run_id"]]["time_to_accuracy_s"])
    assert row["target"] == "validation accuracy >= 0.95"


def test_the_rules_about_a_few_runs_read_from_the_index_are_those_of_every_finding(centre: Path) -> None:
    """Reports and advice ask for the rules about each point's runs from ``Findings``, indexed by run, so that a
    store of many campaigns is not read whole per question; the answers must be those of reading every finding."""
    from honestscale import lint as linter
    from honestscale.analysis.points import Findings, lint_codes
    from honestscale.store import open_store
    from honestscale.view import build

    con = open_store(centre, read_only=True)
    try:
        view = build(con, None)
    finally:
        con.close()
    every = [f.as_json() for f in linter.lint(view).findings]
    indexed = Findings(every)
    assert indexed == every and len({f["code"] for f in every if f["runs"]}) > 3
    asked = [{r.id for r in c.runs} for c in view.comparisons] + [{r.id} for r in view.runs[::7]]
    asked += [{r.id for r in view.runs if r.campaign == name} for name in ("centre-000", "centre-002")]
    for run_ids in asked:
        assert lint_codes(indexed, run_ids) == lint_codes(every, run_ids), sorted(run_ids)[:3]
        assert indexed.about_runs(run_ids) == [f for f in every if run_ids.intersection(f["runs"])]
    assert any(lint_codes(every, ids)["fail"] for ids in asked) and any(
        lint_codes(every, ids)["cannot_verify"] for ids in asked
    )
    for c in view.comparisons:
        assert indexed.about_comparison(c.id) == [f for f in every if f["comparison"] == c.id]
