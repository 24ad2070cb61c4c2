"""The report never fools its readers: verdicts beside every number, one statistic everywhere, pages that fit.

Stalled base cases are built from event files (tests/lint_campaigns.py); the digits campaign is the README's
main job, run for real on this machine; the MLPerf v0.7 logs are the real ones.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import cli
from tests.lint_campaigns import GOOD, build, case_runs
from tests.reports import needs_poppler, report_json, report_pdf, text_of

pytestmark = needs_poppler()

# A 1-worker base case on a busy 2-core host: 60 of its ~400 1.3 ms steps stall for 25 ms (as seen on this
# machine while other work ran), so its time to train is mostly stalls; 2 workers step at 5.6 ms, no stalls.
DIGITS_LIKE = {"global_batch_size": 64, "model": "mlp", "dataset": "digits", "input_shape": [1, 8, 8],
               "accelerator": None, "steps": 400}  # fmt: skip
STALLED = [
    {**DIGITS_LIKE, "id": "base", "workers": 1, "step_s": 0.0013, "stalls": 60, "stall_s": 0.025,
     "ttt_by_rep": [1.9, 2.0, 2.1, 2.2, 1.8, 2.0],
     "isolation": {"exclusive": True, "host_load_1m": 4.2, "cpus": 2, "ranks_on_host": 1}},
    {**DIGITS_LIKE, "id": "big", "workers": 2, "step_s": 0.0056, "ttt_by_rep": [0.45, 0.49, 0.5, 0.52, 0.48, 0.47],
     "isolation": {"exclusive": True, "host_load_1m": 1.2, "cpus": 2, "ranks_on_host": 2}},
]  # fmt: skip


def test_a_stalled_base_case_gets_the_new_rules_beside_its_speedup_on_page_1(tmp_path: Path) -> None:
    store = build(tmp_path, {"runs": STALLED})
    findings = report_json("lint", "--store", store, "-f", "json")
    failing = {f["code"] for f in findings if f["outcome"] == "fail"}
    assert {"HS208", "HS209", "HS210", "HS211"} <= failing, failing
    (hs211,) = [f for f in findings if f["code"] == "HS211"]
    assert (
        "point in different directions" in hs211["message"]
        and "supports the steady state" in hs211["message"]
    )
    (hs210,) = [f for f in findings if f["code"] == "HS210"]
    assert sorted(hs210["runs"]) == [f"base-w1-r{i}" for i in range(6)]  # only the stalled runs
    shares = [r["share_of_time_to_train"] for r in hs210["evidence"]["per_run"].values()]
    assert all(0.6 < s < 0.8 for s in shares) and all(
        r["outliers"] == 60 for r in hs210["evidence"]["per_run"].values()
    )
    page1 = text_of(report_pdf(store, tmp_path, "--html", str(tmp_path / "r.html")), 1, 1)
    sentence = page1[page1.index("At 2:") : page1.index("Lint on this series")]
    assert re.search(r"\d\.\d\dx \[\d\.\d\d, \d\.\d\d\] on the median time to accuracy", sentence), sentence
    # the 2-worker number's mark counts the rules about exactly its runs; their codes are one hover away (HTML)
    failing_here = _mark_codes(tmp_path / "r.html", "At 2:")
    assert {"HS208", "HS209", "HS211"} <= failing_here, failing_here
    assert f"[rules: ✗ {len(failing_here)} ·" in sentence, sentence
    series = page1[page1.index("Lint on this series") :]
    assert "no finding" not in series.split("Total cost")[0] and "HS210" in series
    # the advisor carries the same verdicts and does not project from a superlinear pair of points
    advice = cli("advise", "--store", store).stdout
    assert (
        "no projection: the measured efficiency is above the ideal beyond its interval (superlinear, HS209)"
        in advice
    )
    assert "projected efficiency" not in advice
    assert re.search(r"Fastest to the target for \S+ on \S+: torch at 2 .*\[rules: ✗ HS209, HS211", advice), (
        advice
    )


def _mark_codes(html: Path, where: str) -> set[str]:
    """The failing rules' codes in the title of the first verdict mark after ``where`` on the HTML page."""
    page = html.read_text()
    title = re.search(r'<span class="verdicts" title="([^"]*)"', page[page.index(where) :])
    assert title is not None, where
    failing = title.group(1).split(";")[0]
    return set(re.findall(r"HS\d{3}", failing)) if failing.startswith("✗") else set()


def test_a_series_failing_hs106_shows_it_beside_every_number(tmp_path: Path) -> None:
    case = {"change": {"finals": {"data_source": "synthetic"}}}
    store = build(tmp_path, case | {"runs": case_runs(case)})
    page1 = text_of(report_pdf(store, tmp_path, "--html", str(tmp_path / "r.html")), 1, 1)
    assert "HS106" in page1[page1.index("Lint on this series") :]  # the series lists its rules once, in full
    for where in ("Base case:", "At 8:"):  # and each number's mark has HS106 one hover away
        assert "HS106" in _mark_codes(tmp_path / "r.html", where), where
    # the careful campaign itself: "no finding" is said, and true
    store = build(tmp_path / "good", {"runs": [dict(r) for r in GOOD]})
    assert report_json("lint", "--store", store, "-f", "json") == []
    assert "Lint on this series: no finding" in text_of(report_pdf(store, tmp_path / "good"), 1, 1)


def test_a_misspelt_campaign_exits_2_naming_the_nearest(tmp_path: Path) -> None:
    case = {"change": {"all": {"campaign": "imagenet-scaling"}}, "campaign": "imagenet-scaling"}
    store = build(tmp_path, case | {"runs": case_runs(case)})
    for command in (["lint"], ["report", "-o", str(tmp_path / "r.pdf")], ["runs"], ["summary"], ["advise"]):
        result = cli(*command, "--store", store, "--campaign", "imagenet-scalng")
        assert result.returncode == 2, (command, result.stderr)
        assert "no campaign 'imagenet-scalng'" in result.stderr and "nearest first: " in result.stderr
        assert "imagenet-scaling" in result.stderr.split("nearest first: ")[1]
    assert not (tmp_path / "r.pdf").exists()
    # --store before the command is the same store
    assert cli("--store", store, "lint", "--campaign", "imagenet-scalng").returncode == 2
    assert cli("--store", store, "runs", "-f", "json").returncode == 0


def test_report_on_an_empty_store_says_so(tmp_path: Path) -> None:
    store = tmp_path / "empty.duckdb"
    assert cli("migrate", "--store", store).returncode == 0
    result = cli("report", "--store", store, "-o", tmp_path / "r.pdf")
    assert result.returncode == 2 and "holds no runs" in result.stderr
    assert not (tmp_path / "r.pdf").exists()
