"""A series split by a label says so (issue 75): where one submitter's points of one model fall into separate series
only because their framework label differs (NVIDIA's GPT-3 at 512 GPUs as "PyTorch NVIDIA Release 23.09", from 768
as "NVIDIA NeMo ..."), ``lint``, ``show``, ``summary``, the report, ``predict`` and ``claims`` say which label split
them and where, from one mechanism (``view.label_splits``); labels run side by side at the same worker counts (a
campaign comparing frameworks) split nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import cli
from tests.lint_campaigns import build, case_runs

OLD, NEW = "PyTorch NVIDIA Release 23.09", "NVIDIA NeMo Framework Release 23.11"
SAID = (
    f"split by its framework label: resnet50 points carry 2 labels ('{OLD}' at 1, 8; '{NEW}' at 16 workers), "
    "each label its own series"
)


def _store(tmp_path: Path, extra: dict[str, Any]) -> Path:
    case = {"change": {"finals": {"framework": OLD}}, "add": [extra]}
    return build(tmp_path, case | {"runs": case_runs(case)})


def test_a_series_split_by_its_framework_label_says_so_everywhere(tmp_path: Path) -> None:
    store = _store(tmp_path, {"id": "huge", "workers": 16, "ttt": 2_500.0, "framework": NEW})
    model = json.loads(cli("report", "--store", store, "-f", "json").stdout)
    (series,) = [c for c in model["comparisons"] if c["kind"] == "scaling"]
    assert [p["workers"] for p in series["points"]] == [1, 8]  # the 16-worker point is no point of it ...
    assert series["split_note"] == SAID  # ... and the series says why
    assert SAID in cli("lint", "--store", store).stdout
    rows = json.loads(cli("summary", "--store", store, "-f", "json").stdout)
    assert {r["workers"]: r["series_split"] for r in rows} == {1: SAID, 8: SAID, 16: None}
    assert SAID in " ".join(cli("summary", "--store", store).stdout.split())
    (forecast,) = json.loads(cli("predict", "--store", store, "-f", "json").stdout)
    assert forecast["split"] == SAID
    run = json.loads(cli("show", "big-w8-r0", "--store", store, "-f", "json").stdout)
    assert [s["split"] for s in run["series"]] == [SAID]
    assert "that series is split by its framework label" in cli("show", "big-w8-r0", "--store", store).stdout
    claims = tmp_path / "claims.toml"
    claims.write_text('version = 1\n[[claim]]\nid = "s"\nsays = "8 workers are 7x faster"\nmeasure = "speedup"\n'
                      'runs = "campaign=c"\nat = { workers = 8 }\nrelation = "at_least"\nvalue = 7.0\n')  # fmt: skip
    (claim,) = json.loads(cli("claims", "check", claims, "--store", store, "-f", "json").stdout)["claims"]
    assert any(SAID in e for e in claim["evidence"]), claim["evidence"]


def test_frameworks_side_by_side_at_the_same_scales_split_nothing(tmp_path: Path) -> None:
    store = _store(tmp_path, {"id": "other", "workers": 8, "ttt": 4_100.0, "framework": NEW})
    model = json.loads(cli("report", "--store", store, "-f", "json").stdout)
    assert [c["split_note"] for c in model["comparisons"] if c["kind"] == "scaling"] == [None]
    assert "split by" not in cli("lint", "--store", store).stdout


def _claim(tmp_path: Path, extra: str) -> dict[str, Any]:
    claims = tmp_path / "claims.toml"
    claims.write_text('version = 1\n[[claim]]\nid = "s"\nsays = "16 workers are 10x faster than 1"\n'
                      'measure = "speedup"\nruns = "campaign=c"\nat = { workers = 16 }\nrelation = "at_least"\n'
                      f"value = 10.0\n{extra}")  # fmt: skip
    store = tmp_path / "store.duckdb"
    (claim,) = json.loads(cli("claims", "check", claims, "--store", store, "-f", "json").stdout)["claims"]
    return claim  # type: ignore[no-any-return]


def test_a_base_case_of_another_label_is_used_only_across_that_label(tmp_path: Path) -> None:
    """The 1-worker point carries the old label, 8 and 16 workers the new one (their series starts at 8): a
    speedup "from 1 worker" was judged against 8. Named with base, it is refused with the label that differs;
    with across = ["framework"] it is the ratio over the 1-worker point."""
    case = {"change": {"finals": {"framework": NEW}, "base": {"framework": OLD}},
            "add": [{"id": "huge", "workers": 16, "ttt": 2_500.0, "framework": NEW}]}  # fmt: skip
    store = build(tmp_path, case | {"runs": case_runs(case)})
    model = json.loads(cli("report", "--store", store, "-f", "json").stdout)
    (series,) = [c for c in model["comparisons"] if c["kind"] == "scaling"]
    assert [p["workers"] for p in series["points"]] == [8, 16]
    metric = "tta_s" if series["metric"].endswith("to accuracy") else "time_s"
    one = next(
        p for c in model["comparisons"] if c["kind"] == "config" for p in c["points"] if p["workers"] == 1
    )
    sixteen = next(p for p in series["points"] if p["workers"] == 16)
    refused = _claim(tmp_path, "base = { workers = 1 }\n")
    assert refused["verdict"] == "cannot verify" and f"framework '{OLD}' there, '{NEW}' in the series" in refused[
        "reason"], refused  # fmt: skip
    across = _claim(tmp_path, 'base = { workers = 1 }\nacross = ["framework"]\n')
    assert across["number"]["value"] == pytest.approx(one[metric] / sixteen[metric], rel=1e-9), across
    assert any("over the base case at 1 worker(s)" in e for e in across["evidence"])
    unnamed = _claim(tmp_path, "")  # the series' own base case, 8 workers, as before
    assert any("over the base case at 8 worker(s)" in e for e in unnamed["evidence"])
