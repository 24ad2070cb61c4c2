"""The linter end to end: real MLPerf logs, a real campaign from honestscale's runners, formats, suppressions."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from honestscale.cli import app
from honestscale.errors import HonestscaleError
from tests.conftest import cli, query
from tests.lint_campaigns import GOOD, build, case_runs


@pytest.fixture(scope="module")
def mlperf_store(mlperf: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("lint-mlperf") / "s.duckdb"
    assert cli("ingest", mlperf, "--store", store).returncode == 0
    return store


def test_mlperf_v07_lint_report_advise_and_summary_tell_one_story(mlperf_store: Path) -> None:
    """The Dell EMC series (4, 8, 16 V100s, the batch per worker constant, every run to 75.9 % top-1): one kind
    (time to solution) and one superlinear verdict from every command, no HS104 between two names of one chip, HS106 unverifiable."""
    text = cli("lint", "--store", mlperf_store)
    assert "Traceback" not in text.stderr
    assert "time to solution scaling, workers [4, 8, 16]" in text.stdout
    findings = json.loads(cli("lint", "--store", mlperf_store, "-f", "json").stdout)
    by_code: dict[str, list[dict[str, Any]]] = {}
    for f in findings:
        by_code.setdefault(str(f["code"]), []).append(f)
    hs102 = by_code["HS102"]
    assert {f["outcome"] for f in hs102} == {"fail"}
    assert all("validation accuracy, not a test accuracy" in str(f["message"]) for f in hs102)
    dell = [f for f in hs102 if "C4140" in " ".join(map(str, f["runs"]))]
    assert len(dell) == 3  # one per configuration: 1, 2 and 4 nodes
    (hs103,) = by_code["HS103"]
    assert hs103["outcome"] == "cannot_verify" and "no tuning runs are recorded" in str(hs103["message"])
    # every run trained to 75.9 % top-1 with the batch grown with the system: time to solution, which MLPerf's rules
    # declare; HS111 passes it (it failed it as "mixed" before the kind existed)
    assert "HS111" not in by_code
    assert set(findings[0]) >= {
        "code",
        "severity",
        "outcome",
        "runs",
        "comparison",
        "message",
        "evidence",
        "fix",
    }
    google = [f for f in by_code["HS207"] if "Google" in " ".join(map(str, f["runs"]))]
    assert google and "cpu" in google[0]["evidence"]["missing"]
    # "NVIDIA V100" (Google) and "Nvidia Tesla V100-SXM2-32GB" (Dell) are one chip: no HS104; MLPerf logs record
    # no step, so no data time: HS106 cannot verify any configuration
    assert "HS104" not in by_code
    assert {f["outcome"] for f in by_code["HS106"]} == {"cannot_verify"} and len(by_code["HS106"]) == 4
    # superlinear or not, from the store's own times: 4 -> 8 workers more than halves the median time
    medians = dict(query(mlperf_store, "SELECT n_accelerators, median(time_to_train_s) FROM runs "
                                       "WHERE system LIKE '%C4140' GROUP BY 1"))  # fmt: skip
    assert medians[4] / medians[8] / 2 > 1.0 > medians[4] / medians[16] / 4
    hs209 = by_code["HS209"]
    # 5 runs a point, fewer than an interval needs: HS209 cannot verify the 8-worker efficiency above the ideal
    assert [f["evidence"]["workers"] for f in hs209 if f["outcome"] == "cannot_verify"] == [8]
    assert not [f for f in hs209 if f["outcome"] == "fail"] and "too few runs" in hs209[0]["message"]
    series = hs209[0]["comparison"]
    # the report: the same mode, HS209 beside the 8-worker speedup only, and no framework comparison drawn
    model = json.loads(cli("report", "--store", mlperf_store, "-f", "json").stdout)
    (c,) = [c for c in model["comparisons"] if c["id"] == series]
    assert c["mode"] == "time_to_solution" and "every run trains to one quality target" in c["mode_note"]
    # HS209 is about the series: it marks the speedups, never one point's own time (it did before)
    assert not [p for p in c["points"] if "HS209" in p["lint"]["cannot_verify"] + p["lint"]["fail"]]
    assert all(
        "HS209" in p["ratio_lint"]["cannot_verify"] for p in c["points"]
    )  # every speedup is over that base case
    assert c["fit"] is None and "HS209 cannot verify" in c["law_withheld"]
    assert all(not f["frameworks"] for f in model["comparisons"] if f["kind"] == "framework")
    assert all(f["code"] != "HS104" for f in model["lint"]["findings"])
    # advise: the same series, the same mode, no projection for the same reason, and no advice to rerun a
    # published submission
    advice = json.loads(cli("advise", "--store", mlperf_store, "-f", "json").stdout)
    (group,) = advice["groups"]  # the submissions have no campaign: one group, named so
    assert group["campaign"] is None and not group["projections"]
    (why,) = group["withheld"]
    assert "time to solution scaling" in why and "HS209 cannot verify" in why and "rerun" not in why
    # summary: the same mode on every point of the series, HS209 beside the points it concerns
    rows = json.loads(cli("summary", "--store", mlperf_store, "-f", "json").stdout)
    dell_rows = {r["workers"]: r for r in rows if r["framework"].startswith("NGC")}
    assert {w: r["scaling"] for w, r in dell_rows.items()} == dict.fromkeys((4, 8, 16), "time_to_solution")
    assert not [w for w, r in dell_rows.items() if "HS209" in r["lint"]["cannot_verify"]]


def test_sarif_and_exit_codes(tmp_path: Path) -> None:
    store = build(tmp_path, {"runs": case_runs({"change": {"big": {"global_batch_size": 8192}}})})
    sarif = json.loads(cli("lint", "--store", store, "-f", "sarif").stdout)
    assert sarif["version"] == "2.1.0"
    driver = sarif["runs"][0]["tool"]["driver"]
    assert driver["name"] == "honestscale" and len(driver["rules"]) >= 19
    (result,) = [r for r in sarif["runs"][0]["results"] if r["ruleId"] == "HS111"]
    assert (
        result["level"] == "error" and "the series is time to solution scaling" in result["message"]["text"]
    )
    assert result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].startswith("file://")
    failing = cli("lint", "--store", store)
    assert failing.returncode == 1 and "HS111 FAIL" in failing.stdout
    assert cli("lint", "--store", store, "--ignore", "HS111").returncode == 0
    only = json.loads(cli("lint", "--store", store, "--select", "HS1", "-f", "json").stdout)
    assert {f["code"] for f in only} <= {f"HS1{n:02d}" for n in range(1, 13)}
    bad = cli("lint", "--store", store, "--select", "HS999")
    assert bad.returncode == 2 and "no rule 'HS999'" in bad.stderr


def test_explain_prints_the_docstring_sections() -> None:
    runner = CliRunner()
    out = runner.invoke(app, ["lint", "--explain", "hs106"]).output
    assert out.startswith("HS106 io-not-considered (warning)")
    for section in ("What it checks:", "Why it misleads:", "Example:", "Fix:", "Reference:"):
        assert section in out
    assert runner.invoke(app, ["lint", "--explain", "io-not-considered"]).output == out
    unknown = runner.invoke(app, ["lint", "--explain", "HS000"]).exception  # the CLI's main prints it, exit 2
    assert isinstance(unknown, HonestscaleError) and unknown.message == "no rule 'HS000'"


def test_rules_are_named_after_the_bad_practice_and_old_names_still_work(tmp_path: Path) -> None:
    from honestscale.lint import registry

    imperative = re.compile(r"^(do|don't|do-not|ignore|hide|only|train|compare|use|report|never|always)-")
    rules = registry()
    assert not [cls.name for cls in rules.values() if imperative.match(cls.name)]
    renamed = {old: cls for cls in rules.values() for old in cls.old_names}
    assert len(renamed) == 7 and all(imperative.match(old) for old in renamed)
    runner = CliRunner()
    for old, cls in renamed.items():  # --explain by an old name: the new one, and the note saying so
        out = runner.invoke(app, ["lint", "--explain", old]).output
        assert out.startswith(f"note: rule name {old!r} is deprecated: {cls.code} is now {cls.name!r}"), out
        assert f"{cls.code} {cls.name} ({cls.severity})" in out
    reason = "synthetic inputs on purpose: this campaign measures the interconnect, not the pipeline"
    case = {"change": {"finals": {"data_source": "synthetic"}},
            "spec": {"tool": {"honestscale": {"lint": {"ignore": [{"code": "do-not-consider-io", "reason": reason}]}}}}}  # fmt: skip
    store = build(tmp_path, case | {"runs": case_runs(case)})
    by_name = runner.invoke(
        app, ["lint", "--store", str(store), "-f", "json", "--select", "io-not-considered"]
    )
    findings = json.loads(by_name.stdout)
    assert findings and {f["code"] for f in findings} == {"HS106"}
    assert all(f["suppressed"] == {"reason": reason} for f in findings), (
        "the old name in a suppression still works"
    )
    assert "'do-not-consider-io' is deprecated: HS106 is now 'io-not-considered'" in by_name.stderr
    hidden = runner.invoke(
        app, ["lint", "--store", str(store), "-f", "json", "--select", "hide-the-tuning-runs"]
    )
    assert {f["code"] for f in json.loads(hidden.stdout)} <= {"HS103"}
    assert "'hide-the-tuning-runs' is deprecated: HS103 is now 'tuning-runs-hidden'" in hidden.stderr
    wrong = runner.invoke(app, ["lint", "--store", str(store), "--select", "no-such-practice"])
    assert (
        isinstance(wrong.exception, HonestscaleError)
        and wrong.exception.message == "no rule 'no-such-practice'"
    )
    assert "--rules-doc" in (wrong.exception.fix or "")


def test_suppression_needs_a_reason_and_applies_to_its_campaign_only(tmp_path: Path) -> None:
    reason = "synthetic inputs on purpose: this campaign measures the interconnect, not the pipeline"
    case = {"change": {"finals": {"data_source": "synthetic"}},
            "spec": {"tool": {"honestscale": {"lint": {"ignore": [{"code": "HS106", "reason": reason}]}}}}}  # fmt: skip
    store = build(tmp_path, case | {"runs": case_runs(case)})
    findings = json.loads(cli("lint", "--store", store, "-f", "json", "--select", "HS106").stdout)
    assert findings and all(f["suppressed"] == {"reason": reason} for f in findings)
    text = cli("lint", "--store", store, "--select", "HS106").stdout
    assert "SUPPRESSED" in text and reason[:40] in text.replace("\n", " ")
    cfg = tmp_path / "honestscale.toml"
    cfg.write_text('[tool.honestscale.lint]\nignore = [{ code = "HS202", reason = "pilot study" }]\n')
    refused = cli("lint", "--store", store, "--config", cfg)
    assert refused.returncode == 2 and "does not name the campaign" in refused.stderr
    cfg.write_text('[tool.honestscale.lint]\nignore = [{ code = "HS202", campaign = "c" }]\n')
    refused = cli("lint", "--store", store, "--config", cfg)
    assert refused.returncode == 2 and "no written justification" in refused.stderr


def test_campaign_spec_suppression_without_reason_is_refused_before_running(tmp_path: Path) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text('[campaign]\nname = "x"\n[args]\nmodel = "mlp"\n[grid]\nworkers = [1]\n'
                    '[tool.honestscale.lint]\nignore = [{ code = "HS106" }]\n')  # fmt: skip
    result = cli("campaign", "run", spec, "--store", tmp_path / "s.duckdb")
    assert result.returncode == 2 and "no written justification" in result.stderr
    assert not (tmp_path / "runs").exists()


def test_good_fixture_campaign_passes_every_rule(tmp_path: Path) -> None:
    store = build(tmp_path, {"runs": [dict(r) for r in GOOD]})
    result = cli("lint", "--store", store, "-f", "json")
    assert result.returncode == 0 and json.loads(result.stdout) == []


def test_a_run_whose_clock_went_backwards_is_no_silent_success(tmp_path: Path) -> None:
    """run_stop stamped 22 s before run_start, and a clock stepping 500 s back mid-run: HS213 names both runs, the
    lint exits 1, and the summary neither counts the first as a success nor prints its -22 s."""
    runs = [{"id": "ok", "workers": 1, "reps": 2, "ttt": 3600.0},
            {"id": "back", "workers": 1, "reps": 1, "ttt": 3600.0, "stop_at": -22.0},
            {"id": "ntp", "workers": 1, "reps": 1, "ttt": 3600.0, "clock_back": 500.0}]  # fmt: skip
    store = build(tmp_path, {"runs": runs})
    result = cli("lint", "--store", store, "--select", "HS213", "-f", "json")
    assert result.returncode == 1
    found = {f["evidence"]["run"]: f for f in json.loads(result.stdout)}
    assert set(found) == {"back-w1-r0", "ntp-w1-r0"}
    assert found["back-w1-r0"]["evidence"]["time_to_train_s"] == pytest.approx(-22.0)
    assert "run_stop is 22.0 s before run_start" in found["back-w1-r0"]["message"]
    assert found["ntp-w1-r0"]["evidence"]["clock_backwards"]["largest_step_back_s"] > 300
    (row,) = json.loads(cli("summary", "--store", store, "-f", "json").stdout)
    assert (row["runs"], row["succeeded"]) == (4, 3) and row["time_to_train_s"] > 0
    assert "HS213" in row["lint"]["error"]
    text = cli("summary", "--store", store).stdout
    assert "-22" not in text and "HS213" in text


def test_an_mlperf_log_that_stops_before_it_starts_is_a_finding(mlperf: Path, tmp_path: Path) -> None:
    """A Dell log whose run_stop is moved before its run_start: HS213 fails with the negative time, and the
    submission's other runs are what its numbers are made of."""
    tree = tmp_path / "DellEMC"
    shutil.copytree(mlperf / "DellEMC", tree, ignore=shutil.ignore_patterns("2xC4140", "4xC4140"))
    log = tree / "results" / "C4140" / "resnet" / "result_0.txt"
    text = log.read_text()
    start = int(re.search(r'"time_ms": (\d+), "event_type": "INTERVAL_START", "key": "run_start"', text)[1])  # type: ignore[index]
    log.write_text(re.sub(r'"time_ms": \d+(, "event_type": "INTERVAL_END", "key": "run_stop")',
                          rf'"time_ms": {start - 9_231_000}\1', text))  # fmt: skip
    store = tmp_path / "s.duckdb"
    assert cli("ingest", tree, "--store", store).returncode == 0
    result = cli("lint", "--store", store, "--select", "HS213", "-f", "json")
    assert result.returncode == 1
    (f,) = json.loads(result.stdout)
    assert f["runs"][0].endswith("C4140/resnet/result_0") and f["evidence"]["time_to_train_s"] == -9231.0
    (row,) = json.loads(cli("summary", "--store", store, "-f", "json").stdout)
    assert (row["runs"], row["succeeded"]) == (5, 4) and "HS213" in row["lint"]["error"]
