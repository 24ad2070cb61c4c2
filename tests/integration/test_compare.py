"""`honestscale compare` on real runner events (examples/compare: the digits MLP, 6 runs a side, one factor changed
in one campaign, two in another, one campaign run twice) and on the real MLPerf v0.7 logs."""

from __future__ import annotations

import json
from pathlib import Path
from statistics import median
from typing import Any

import pytest
from scipy import stats

from honestscale.analysis.stats import DECISION_RULE, MIN_INTERVAL_RUNS
from tests.conftest import COMPARE_RUNS, REPO, cli

RUNS = COMPARE_RUNS


def _json(store: Path, *args: str) -> tuple[int, dict[str, Any]]:
    got = cli("compare", *args, "--store", store, "--format", "json")
    assert got.returncode in (0, 1, 3), got.stderr
    return got.returncode, json.loads(got.stdout)


def _text(store: Path, *args: str) -> tuple[int, str]:
    """``honestscale compare`` as text: its exit code and what it printed."""
    got = cli("compare", *args, "--store", store)
    assert got.returncode in (0, 1, 3), got.stderr
    return got.returncode, got.stdout + got.stderr


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


@pytest.mark.parametrize(
    "sides",
    [
        ("compare-base", "compare-loaders"),  # campaigns
        ("campaign=compare-base", "campaign=compare-loaders,workers=1"),  # key=value
        (
            "run_id=compare-base-workers=1-ef571e73-r0",
            "run_id=compare-loaders-workers=1-65311d96-r0",
        ),  # run ids
        ("campaign=compare-base,run_id=compare-base-workers=1-ef571e73-r0", "compare-loaders"),  # mixed
    ],
    ids=["campaigns", "key-value", "run-ids", "mixed"],
)
def test_the_factor_is_named_whatever_the_selectors(compare_store: Path, sides: tuple[str, str]) -> None:
    """A run's identity (its run_id, its campaign) is no setup under study: whatever the selectors, the one thing
    that differs (the loader workers, 0 -> 1) is the factor, never a confound that HS214 then reports."""
    _, doc = _json(compare_store, *sides)
    (pair,) = doc["pairs"]
    assert [d["field"] for d in pair["factor"]] == ["hyperparameters.loader_workers"], pair
    assert pair["confounds"] == [] and "HS214" not in pair["verdicts"]["fail"]


def test_a_difference_within_noise_is_not_called_one(compare_store: Path) -> None:
    rc, doc = _json(
        compare_store, "compare-base", "compare-again", "--fail-if-slower", "5%", "--fail-if-faster", "5%"
    )
    (pair,) = doc["pairs"]
    assert pair["factor"] == [] and pair["confounds"] == [] and pair["differs"] == []
    time = next(m for m in pair["measures"] if m["measure"] == "time")
    assert time["significant"] is False and time["ratio"]["low"] < 1 < time["ratio"]["high"]
    assert time["verdict"] == "no significant difference"
    # no difference shown, but an interval of 0.75-1.6 cannot rule a 5 % change out: the gate cannot judge
    assert rc == 3 and all(
        g["outcome"] == "cannot judge" and "no significant difference" in g["reason"]
        and "holds the 5 % threshold" in g["reason"] and g["missing"] == "runs"
        for g in doc["gate"]
    )  # fmt: skip
    # throughput: Mann-Whitney finds nothing, the ratio's interval and the sides' intervals do: said so
    rates = next(m for m in pair["measures"] if m["measure"] == "throughput")
    assert (
        rates["p_value"] > 0.05 and rates["ratio"]["high"] < 1 and rates["a"]["ci"][0] > rates["b"]["ci"][1]
    )
    assert rates["verdict"] == "the tests disagree" and rates["significant"] is False
    assert "the tests disagree" in rates["sentence"] and "intervals overlap" not in rates["sentence"]
    rc, doc = _json(compare_store, "compare-base", "compare-again", "--fail-if-slower", "1%", "--measure",
                    "throughput")  # fmt: skip
    assert rc == 3 and doc["gate"][0]["outcome"] == "cannot judge" and doc["gate"][0]["missing"] == "test"


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
    text = cli("compare", "compare-base", "compare-confounded", "--store", compare_store, "--format", "sarif")
    sarif = json.loads(text.stdout)
    assert any(r["ruleId"] == "HS214" for r in sarif["runs"][0]["results"])


def test_the_gate_trips_on_a_real_slowdown_and_says_why_not_otherwise(compare_store: Path) -> None:
    slow = cli(
        "compare", "compare-base", "compare-loaders", "--store", compare_store, "--fail-if-slower", "5%"
    )
    assert slow.returncode == 1 and "beyond the 5 % threshold" in slow.stdout
    rc, doc = _json(
        compare_store, "compare-base", "compare-loaders", "--fail-if-faster", "5%", "--measure", "throughput"
    )
    assert rc == 0 and "significantly slower, not faster" in doc["gate"][0]["reason"]
    # far beyond what was measured: significant, and the whole interval within the threshold
    rc, doc = _json(compare_store, "compare-base", "compare-loaders", "--fail-if-slower", "900%")
    assert rc == 0 and "within the 900 % threshold" in doc["gate"][0]["reason"]
    assert doc["gate"][0]["outcome"] == "pass"


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
    assert rc == 3 and "different problems" in doc["gate"][0]["reason"]
    assert doc["gate"][0]["outcome"] == "cannot judge" and doc["gate"][0]["missing"] == "problem"


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
    # one run of compare-loaders leaves 6 slow steps (its loader workers starting) after its 3 marked warm-up steps:
    # MSER-5 finds them in the step times, and HS205 fails that point
    assert [p["verdicts"]["fail"] for p in series["points"]] == [
        ["HS106"],
        ["HS106", "HS205"],
        ["HS106"],
        ["HS106"],
    ]
    # the text names the rules that cannot be verified too, as compare does
    rc, text = _text(compare_store, "--history", "model=mlp")
    assert rc == 0 and text.count("cannot verify: HS103") == 4 and text.count("HS206") == 4


def test_user_errors_name_the_fix(compare_store: Path) -> None:
    for args, words in (
        (("compare-bse", "compare-again"), "did you mean compare-base"),
        (("compare-base", "campaign=compare-again,nccl_version=2"), "no field 'nccl_version'"),
        (("compare-base", "compare-again", "--fail-if-slower", "five"), "is not a percentage"),
        (("compare-base", "model=mlp"), "share 6 run(s)"),
        (("compare-base",), "needs two sides"),
    ):
        got = cli("compare", *args, "--store", compare_store)
        assert got.returncode == 2 and words in got.stderr and "fix" in got.stderr, (args, got.stderr)
        assert "Traceback" not in got.stderr


def test_the_comparison_report_draws_every_run(compare_store: Path, tmp_path: Path) -> None:
    pdf, html = tmp_path / "compare.pdf", tmp_path / "compare.html"
    got = cli("compare", "compare-base", "compare-loaders", "--store", compare_store, "-o", pdf, "--html", html,
              "--fail-if-slower", "5%")  # fmt: skip
    assert got.returncode == 1, got.stderr
    assert pdf.read_bytes().startswith(b"%PDF")
    svg = (tmp_path / "compare_files" / "pair1.svg").read_text()
    assert svg.count("A: one run") == 12 and svg.count("B: one run") == 12  # 6 a side, time and throughput
    page = html.read_text()
    assert "loader workers 0 → 1" in page and "median of runs" in page and "harmonic mean of runs" in page
    assert "FAIL" in page and (tmp_path / "compare_files" / "pairs.csv").read_text().count("\n") == 3


def test_the_gate_cannot_judge_without_data_and_never_says_pass(compare_store: Path) -> None:
    """Each reason it cannot judge, in process: exit 3, never 'pass', naming what is missing."""
    one = "campaign=compare-base,run_id=compare-base-workers=1-ef571e73-r0"
    other = "campaign=compare-loaders,run_id=compare-loaders-workers=1-65311d96-r0"
    cases = {
        "measure": ("compare-base", "compare-again", "--measure", "energy"),  # CPU runs: no energy recorded
        "runs": (one, other),  # one run a side: no test, no interval
        "test": ("compare-base", "compare-again", "--measure", "throughput"),  # the tests disagree
        "problem": ("compare-base", "source=mlperf,system=C4140"),  # different problems (HS112)
    }
    for missing, args in cases.items():
        rc, text = _text(compare_store, *args, "--fail-if-slower", "5%")
        gate = text[text.index("gate --fail-if-slower") :]
        assert rc == 3 and "cannot judge" in gate and "pass" not in gate, (missing, gate)
        rc, doc = _json(compare_store, *args, "--fail-if-slower", "5%")
        assert rc == 3 and [g["missing"] for g in doc["gate"]] == [missing], (missing, doc["gate"])


def _checks_out(m: dict[str, Any], where: str) -> None:
    """The verdict of one measure follows from the numbers printed beside it, by the stated decision rule."""
    d = m["verdict"]
    if d is None:  # the MLPerf score (one number a side, no test), or a measure a side lacks
        assert m["p_value"] is None and ("no test" in m["sentence"] or "none on side" in m["sentence"]), where
        return
    said = []
    p, n = m["p_value"], (len(m["a"]["values"]), len(m["b"]["values"]))
    from math import comb

    if p is not None and 2 / comb(sum(n), n[0]) < 0.05:
        said.append(p < 0.05)
        assert f"p = {p:.3g}" in m["sentence"], where
    r = m["ratio"]
    if min(n) < MIN_INTERVAL_RUNS:  # no interval from too few runs, of a side or of the ratio
        assert r is None or (r["low"] is None and r["high"] is None), where
        assert m["a"]["ci"] == [None, None] or n[0] >= MIN_INTERVAL_RUNS, where
        assert m["b"]["ci"] == [None, None] or n[1] >= MIN_INTERVAL_RUNS, where
        assert "no interval" in m["sentence"], where
    if r is not None and r["low"] is not None:
        excludes = not r["low"] <= 1 <= r["high"]
        said.append(excludes)
        assert ("excludes 1" if excludes else "holds 1") in m["sentence"], where
    (al, ah), (bl, bh) = m["a"]["ci"], m["b"]["ci"]
    if None not in (al, ah, bl, bh):
        disjoint = al > bh or bl > ah
        if disjoint:
            said.append(True)
        assert ("are disjoint" if disjoint else "overlap") in m["sentence"], where
    expected = ("too few runs" if not said else "differ" if all(said)
                else "no significant difference" if not any(said) else "the tests disagree")  # fmt: skip
    assert d == expected, (where, d, expected, m["sentence"])
    words = {"differ": "significant difference", "too few runs": "too few runs to tell"}.get(d, d)
    assert words in m["sentence"] and m["significant"] == (d == "differ"), where


def test_no_sentence_contradicts_the_intervals_printed_beside_it(compare_store: Path, tmp_path: Path) -> None:
    """Every measure of every pair that the examples and the MLPerf v0.7 logs make: the verdict follows from the
    test and the intervals printed beside it, and the rule is stated."""
    campaigns = ["compare-base", "compare-loaders", "compare-again", "compare-confounded"]
    sides: list[tuple[str, ...]] = [(a, b) for i, a in enumerate(campaigns) for b in campaigns[i + 1 :]]
    weak = ("--factor", "workers", "--factor", "global_batch_size")  # MLPerf's batch grows with the workers
    sides += [("compare-base", "source=mlperf,system=C4140"), ("source=mlperf,workers=4", "source=mlperf,workers=8", *weak),
              ("source=mlperf,workers=8", "source=mlperf,workers=16", *weak)]  # fmt: skip
    ddp = tmp_path / "ddp.duckdb"
    assert cli("ingest", REPO / "examples" / "digits-ddp", "--store", ddp).returncode == 0
    within = ("campaign=digits-ddp-example,workers=1", "campaign=digits-ddp-example,workers=2")
    checked = 0
    for store, (a, b, *more) in [*((compare_store, s) for s in sides), (ddp, within)]:
        rc, doc = _json(store, a, b, *more)
        assert doc["statistics"]["decision_rule"] == DECISION_RULE
        for pair in doc["pairs"]:
            for m in pair["measures"]:
                _checks_out(m, f"{a} vs {b}, {pair['pair']}, {m['name']}")
                checked += 1
    assert checked >= 19
    # the examples' own digits-ddp campaign, 2 runs a side: no ratio interval; the local batch follows from the
    # worker count under strong scaling (not a confound)
    rc, doc = _json(ddp, *within)
    assert rc == 0
    (pair,) = doc["pairs"]
    assert all(m["ratio"]["low"] is None and m["verdict"] == "too few runs" for m in pair["measures"])
    assert [d["field"] for d in pair["follows_from_the_factor"]] == ["local_batch_size"]
    assert "strong scaling" in pair["follows_from_the_factor"][0]["why"] and pair["confounds"] == []
    assert "HS214" not in pair["verdicts"]["fail"]
    _, text = _text(ddp, *within)
    assert "follows from the factor: local batch size 64 → 32 (strong scaling" in text
    assert "no interval: fewer than 6 runs" in text and DECISION_RULE[:40] in " ".join(text.split())
