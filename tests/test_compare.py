"""`honestscale compare` on real runner events (examples/compare: the digits MLP, 6 runs a side, one factor changed
in one campaign, two in another, one campaign run twice) and on the real MLPerf v0.7 logs."""

from __future__ import annotations

import json
from pathlib import Path
from statistics import median
from typing import Any

import pytest
from scipy import stats

from tests.conftest import COMPARE_RUNS, hs

RUNS = COMPARE_RUNS


def _json(store: Path, *args: str) -> tuple[int, dict[str, Any]]:
    got = hs("compare", *args, "--store", store, "--format", "json")
    assert got.returncode in (0, 1), got.stderr
    return got.returncode, json.loads(got.stdout)


def _tta(campaign: str) -> list[float]:
    """Time to accuracy of each run of a campaign, read straight from its event files: start to the first
    validation evaluation at or above the run's target."""
    out = []
    for f in sorted(RUNS.glob(f"{campaign}-workers=1-*/events-rank0.jsonl")):
        events = [json.loads(line) for line in f.read_text().splitlines()]
        start = events[0]
        reached = [e["time"] for e in events
                   if e["kind"] == "eval" and e["split"] == "validation" and e["value"] >= start["stop_value"]]  # fmt: skip
        out.append(min(reached) - start["time"])
    return out


def test_one_factor_changed_is_named_with_its_ratio_interval_and_test(compare_store: Path) -> None:
    rc, doc = _json(compare_store, "compare-base", "compare-loaders")
    assert rc == 0 and doc["schema"] == "honestscale.compare/1"
    (pair,) = doc["pairs"]
    assert [d["field"] for d in pair["factor"]] == ["hyperparameters.loader_workers"]
    assert pair["factor"][0]["a"] == ["0"] and pair["factor"][0]["b"] == ["1"]
    assert pair["confounds"] == [] and doc["unpaired"] == [] and pair["caveat"] is None
    time = next(m for m in pair["measures"] if m["measure"] == "time")
    a, b = _tta("compare-base"), _tta("compare-loaders")
    assert time["name"] == "time to accuracy" and time["statistic"] == "median of runs"
    assert time["a"]["centre"] == pytest.approx(median(a), rel=1e-6)
    assert time["b"]["centre"] == pytest.approx(median(b), rel=1e-6)
    assert time["ratio"]["value"] == pytest.approx(median(b) / median(a), rel=1e-6)
    assert time["ratio"]["low"] > 1 and time["significant"] is True
    assert time["p_value"] == pytest.approx(
        stats.mannwhitneyu(b, a, alternative="two-sided").pvalue, rel=1e-6
    )
    rates = next(m for m in pair["measures"] if m["measure"] == "throughput")
    assert rates["statistic"] == "harmonic mean of runs" and rates["ratio"]["high"] < 1
    # the rules about both sides travel with the pair
    assert "HS106" in pair["verdicts"]["fail"] and "HS214" not in pair["verdicts"]["fail"]


def test_a_difference_within_noise_is_not_called_one(compare_store: Path) -> None:
    rc, doc = _json(
        compare_store, "compare-base", "compare-again", "--fail-if-slower", "5%", "--fail-if-faster", "5%"
    )
    (pair,) = doc["pairs"]
    assert pair["factor"] == [] and pair["confounds"] == [] and pair["differs"] == []
    time = next(m for m in pair["measures"] if m["measure"] == "time")
    assert time["significant"] is False and time["ratio"]["low"] < 1 < time["ratio"]["high"]
    assert rc == 0 and all(
        not g["tripped"] and "no significant difference" in g["reason"] for g in doc["gate"]
    )


def test_a_second_change_is_named_as_a_confound(compare_store: Path) -> None:
    rc, doc = _json(compare_store, "compare-base", "compare-confounded", "--factor", "loader_workers")
    assert rc == 0
    (pair,) = doc["pairs"]
    assert [d["field"] for d in pair["factor"]] == ["hyperparameters.loader_workers"]
    assert [d["field"] for d in pair["confounds"]] == ["lr_schedule"]
    own = [f for f in pair["findings"] if f["code"] == "HS214"]
    assert own and own[0]["outcome"] == "fail" and "lr schedule constant → cosine" in own[0]["message"]
    # without --factor nothing says which of the two is studied: each confounds the other
    _, doc = _json(compare_store, "compare-base", "compare-confounded")
    (pair,) = doc["pairs"]
    assert pair["factor"] == [] and len(pair["confounds"]) == 2 and "HS214" in pair["verdicts"]["fail"]
    text = hs("compare", "compare-base", "compare-confounded", "--store", compare_store, "--format", "sarif")
    sarif = json.loads(text.stdout)
    assert any(r["ruleId"] == "HS214" for r in sarif["runs"][0]["results"])


def test_the_gate_trips_on_a_real_slowdown_and_says_why_not_otherwise(compare_store: Path) -> None:
    slow = hs(
        "compare", "compare-base", "compare-loaders", "--store", compare_store, "--fail-if-slower", "5%"
    )
    assert slow.returncode == 1 and "beyond the 5 % threshold" in slow.stdout
    rc, doc = _json(
        compare_store, "compare-base", "compare-loaders", "--fail-if-faster", "5%", "--measure", "throughput"
    )
    assert rc == 0 and "slower, not faster" in doc["gate"][0]["reason"]
    # far beyond what was measured: significant, but not beyond the threshold
    rc, doc = _json(compare_store, "compare-base", "compare-loaders", "--fail-if-slower", "900%")
    assert rc == 0 and "less than the 900 % threshold" in doc["gate"][0]["reason"]
    # one run a side: no test can tell
    one = "campaign=compare-base,run_id=compare-base-workers=1-ef571e73-r0"
    other = "campaign=compare-loaders,run_id=compare-loaders-workers=1-65311d96-r0"
    rc, doc = _json(compare_store, one, other, "--fail-if-slower", "5%")
    assert rc == 0 and "too few runs to tell" in doc["gate"][0]["reason"]


def test_against_an_mlperf_submission_of_another_target_hs112_fails(compare_store: Path) -> None:
    rc, doc = _json(compare_store, "compare-base", "source=mlperf,system=C4140", "--fail-if-slower", "5%")
    (pair,) = doc["pairs"]
    assert pair["state_of_the_art"] and pair["b"]["submission"].endswith("DellEMC/C4140/resnet")
    assert "different problems" in pair["caveat"] and "HS112" in pair["caveat"]  # said before any ratio
    fields = {d["field"] for d in pair["differs"]}
    assert {"dataset", "stop_value", "target_metric", "hardware", "global_batch_size"} <= fields
    hs112 = [f for f in pair["findings"] if f["code"] == "HS112" and f["comparison"] == pair["comparison"]]
    assert hs112 and "imagenet" in hs112[0]["message"] and "0.759" in hs112[0]["message"]
    assert "HS104" in pair["verdicts"]["fail"]
    score = next(m for m in pair["measures"] if m["measure"] == "mlperf score")
    assert score["b"]["centre"] and "olympic mean" in score["statistic"]
    assert rc == 0 and "cannot gate" in doc["gate"][0]["reason"]


def test_history_flags_only_significant_changes_with_what_changed(compare_store: Path) -> None:
    rc, doc = _json(compare_store, "--history", "model=mlp")
    assert rc == 0
    (series,) = doc["series"]
    names = [p["campaign"] for p in series["points"]]
    assert names == ["compare-base", "compare-loaders", "compare-again", "compare-confounded"]
    base, loaders, again, confounded = series["points"]
    assert not base["change_point"] and loaders["change_point"] and again["change_point"]
    assert [c["field"] for c in loaders["changed"]] == ["hyperparameters.loader_workers"]
    assert {c["field"] for c in confounded["changed"]} == {"lr_schedule", "hyperparameters.loader_workers"}
    assert all(p["verdicts"]["fail"] == ["HS106"] for p in series["points"])


def test_user_errors_name_the_fix(compare_store: Path) -> None:
    for args, words in (
        (("compare-bse", "compare-again"), "did you mean compare-base"),
        (("compare-base", "campaign=compare-again,nccl_version=2"), "no field 'nccl_version'"),
        (("compare-base", "compare-again", "--fail-if-slower", "five"), "is not a percentage"),
        (("compare-base", "model=mlp"), "share 6 run(s)"),
        (("compare-base",), "needs two sides"),
    ):
        got = hs("compare", *args, "--store", compare_store)
        assert got.returncode == 2 and words in got.stderr and "fix" in got.stderr, (args, got.stderr)
        assert "Traceback" not in got.stderr


def test_the_comparison_report_draws_every_run(compare_store: Path, tmp_path: Path) -> None:
    pdf, html = tmp_path / "compare.pdf", tmp_path / "compare.html"
    got = hs("compare", "compare-base", "compare-loaders", "--store", compare_store, "-o", pdf, "--html", html,
             "--fail-if-slower", "5%")  # fmt: skip
    assert got.returncode == 1, got.stderr
    assert pdf.read_bytes().startswith(b"%PDF")
    svg = (tmp_path / "compare_files" / "pair1.svg").read_text()
    assert svg.count("A: one run") == 12 and svg.count("B: one run") == 12  # 6 a side, time and throughput
    page = html.read_text()
    assert "loader workers 0 → 1" in page and "median of runs" in page and "harmonic mean of runs" in page
    assert "FAIL" in page and (tmp_path / "compare_files" / "pairs.csv").read_text().count("\n") == 3
