"""`honestscale predict` on real multi-scale MLPerf series (tests/data/mlperf-v2.0-scaling: MLPerf Training v2.0,
six series at four to six scales, copied byte for byte by scripts/mlperf-scaling-series), each run's time as
mlperf-logging reads it the independent reference."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import pytest

from honestscale.analysis import prediction
from tests.conftest import REPO, cli
from tests.mlperf import scaling_series

DATA = REPO / "tests" / "data" / "mlperf-v2.0-scaling"
TIME = prediction.Measure("time", "time to train", "s", "median of runs", (0.0, float("inf")), ())


@pytest.fixture(scope="module")
def reference() -> dict[str, dict[int, list[float]]]:
    """Each series' successful runs' times to train per accelerator count, as mlperf-logging's summarizer reads
    them."""
    return scaling_series(DATA)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("predict") / "store.duckdb"
    got = cli("ingest", DATA, "--store", path)
    assert got.returncode == 0, got.stderr
    return path


def _predicted(store: Path, *args: str) -> list[dict[str, Any]]:
    got = cli("predict", "--store", store, "--format", "json", *args)
    assert got.returncode == 0, got.stderr
    return json.loads(got.stdout)  # type: ignore[no-any-return]


def test_each_series_times_are_mlperf_loggings_and_go_to_extrap_whole(
    store: Path, reference: dict[str, dict[int, list[float]]], tmp_path: Path
) -> None:
    got = _predicted(store, "--at", "512", "--extrap", str(tmp_path / "series.jsonl"))
    ours = sorted(sorted((int(w), sorted(v)) for w, v in s["samples"]["time"].items()) for s in got)
    theirs = sorted(sorted((w, sorted(v)) for w, v in series.items()) for series in reference.values())
    assert len(ours) == len(theirs) == 6
    for a, b in zip(ours, theirs, strict=True):
        assert [w for w, _ in a] == [w for w, _ in b]
        for (_, x), (_, y) in zip(a, b, strict=True):
            assert x == pytest.approx(y, abs=1.0), (
                "honestscale's time to accuracy against run_stop - run_start"
            )
    lines = [json.loads(line) for line in (tmp_path / "series.jsonl").read_text().splitlines()]
    assert (
        len(lines) == sum(len(v) for s in reference.values() for v in s.values()) == 207
    )  # 210 runs, 3 aborted
    assert {(d["metric"], tuple(d["params"])) for d in lines} == {("time", ("p",))}


def test_time_to_solution_is_modelled_as_its_recipe_and_the_rules_verdicts_ride_along(store: Path) -> None:
    """MLPerf's series train every scale to one target with a batch chosen per scale: time to solution, not a batch
    error. Each prediction of its times says its recipe and target; HS111 marks none of them (it failed every one
    of these series, so nothing was quotable, before the kind existed)."""
    got = cli("predict", "--store", store, "--at", "256")
    text = got.stdout
    assert got.returncode == 0, got.stderr
    assert text.count("time to accuracy (median of runs) at 256 workers") == 6
    assert text.count("(time to solution scaling;") == 6
    assert text.count("time to solution: every run trains to one target (") == 6
    assert "HS111" not in text
    assert "model: " in text and "leave-one-out error" in text
    checks = [line for line in text.splitlines() if "held back and predicted from the smaller counts" in line]
    assert len(checks) == 6, "each series checks its interval on its own largest worker count"
    assert sum(line.endswith(": inside") for line in checks) + sum("OUTSIDE" in line for line in checks) == 6
    for s in _predicted(store, "--at", "256"):
        assert s["mode"] == "time_to_solution"
        assert "HS111" not in s["lint"]["fail"] + s["lint"]["cannot_verify"]
        # 256 workers is within twice every series' largest count, each of four worker counts or more: quotable
        assert [p["quote"] for p in s["predictions"]] == [True], s["predictions"]


def test_scales_held_back_fall_inside_their_intervals(reference: dict[str, dict[int, list[float]]]) -> None:
    """Fit all but the largest one or two scales (three or more left), predict each held back: at least 90 % of
    the measured medians inside their 95 % intervals (benchmarks/scaling_models.py sets Extra-P beside it)."""
    inside = []
    for series in reference.values():
        ws = sorted(series)
        for held in (1, 2):
            if len(ws) - held < 3:
                continue
            for w in ws[-held:]:
                p = prediction.predict(TIME, {x: series[x] for x in ws[:-held]}, w)
                assert p.low is not None and p.high is not None
                inside.append(p.low <= statistics.median(series[w]) <= p.high)
    assert len(inside) == 10
    assert sum(inside) >= 9, inside


def test_a_worker_count_below_one_is_refused(store: Path) -> None:
    got = cli("predict", "--store", store, "--at", "0")
    assert got.returncode == 2 and "--at 0" in got.stderr
