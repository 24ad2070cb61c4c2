"""A series split by a label says so (issue 75): where one submitter's points of one model fall into separate series
only because their framework label differs (NVIDIA's GPT-3 at 512 GPUs as "PyTorch NVIDIA Release 23.09", from 768
as "NVIDIA NeMo ..."), ``lint``, ``show``, ``summary``, the report, ``predict`` and ``claims`` say which label split
them and where, from one mechanism (``view.label_splits``); labels run side by side at the same worker counts (a
campaign comparing frameworks) split nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

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
