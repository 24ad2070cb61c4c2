"""The DLLogger reader on a log written by NVIDIA DeepLearningExamples' own image-classification code
(tests/data/imported/dllogger-dle: ``make_dllogger_dle.py`` drove DLE's ``train_loop`` and ``Logger`` with the real
dllogger package, and wrote ``expected.json`` with what the training measured as it went).

Expected values come from ``expected.json`` or from a few lines of JSON parsing of the log here, never from the
reader. DLE logs each iteration in two ``dllogger.log`` calls (DEFAULT: loss and rates; VERBOSE: the phase times),
both written by its VERBOSE JSON backend: one step each, not two.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_importers import DATA, _cli, _ingest, _query, _runs

DLE = DATA / "dllogger-dle"
LOG = DLE / "dllogger.json"
EXPECTED: dict[str, Any] = json.loads((DLE / "expected.json").read_text())


def _records(path: Path = LOG) -> list[tuple[int, dict[str, Any]]]:
    return [
        (n, json.loads(line.removeprefix("DLLL ")))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if line.startswith("DLLL ")
    ]


def _units() -> dict[str, Any]:
    return {r["metric"]: r["metadata"].get("unit") for _, r in _records() if r["type"] == "METADATA"}


def _train_rows() -> list[tuple[int, dict[str, Any]]]:
    return [
        (n, r)
        for n, r in _records()
        if r["type"] == "LOG" and isinstance(r["step"], list) and len(r["step"]) == 2
    ]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("dle") / "s.duckdb"
    assert "read as NVIDIA DLLogger log" in _ingest(path, LOG)
    return path


def test_the_fixture_has_the_double_row() -> None:
    """What the reader must meet: each iteration's key on two rows (DEFAULT, then VERBOSE), in the log itself."""
    keys = [r["step"] for _, r in _train_rows()]
    per_row = EXPECTED["log_rows_per_iteration"]
    assert per_row == 2 and len(keys) == EXPECTED["iterations"] * per_row
    assert keys[::per_row] == keys[1::per_row] == EXPECTED["step_keys"]


def test_one_step_per_iteration_with_its_samples_and_phases(store: Path) -> None:
    steps = _query(
        store, "SELECT epoch, samples, t_total, t_data, t_compute, warmup FROM steps ORDER BY step"
    )
    assert len(steps) == EXPECTED["iterations"]
    assert [s[0] for s in steps] == [k[0] for k in EXPECTED["step_keys"]]
    assert [s[1] for s in steps] == EXPECTED["samples"]
    assert sum(s[1] for s in steps) == EXPECTED["samples_total"]
    assert [s[5] for s in steps] == [True] + [False] * (len(steps) - 1)
    assert sum(s[3] for s in steps) == pytest.approx(EXPECTED["data_time_sum_s"])
    assert sum(s[4] for s in steps) == pytest.approx(EXPECTED["compute_time_sum_s"])
    # an iteration's compute starts after the previous iteration's rows and ends before its own: inside its
    # step's time (one step per row gave every second step the 0.1 ms between an iteration's two rows)
    assert all(s[4] <= s[2] for s in steps)


def test_the_steady_rate_is_the_trainings(store: Path) -> None:
    (run,) = _runs(store)
    assert run["local_batch_size"] == EXPECTED["samples_per_iteration"]
    assert run["samples_per_s"] == pytest.approx(EXPECTED["steady_samples_per_s"], rel=0.02)


def test_no_rate_or_time_is_a_quality_and_the_final_one_is_top1(store: Path) -> None:
    units = _units()
    measures = {k for k, u in units.items() if isinstance(u, str) and (u == "s" or u.endswith("/s"))}
    assert {"val.total_ips", "val.compute_latency_at95"} <= measures  # what the log says of itself
    evals = _query(store, "SELECT split, metric, value, epoch FROM evals ORDER BY seq")
    metrics = {m for _, m, _, _ in evals}
    assert not metrics & {k.rpartition(".")[2] for k in measures}
    assert all("ips" not in m and "time" not in m and "latency" not in m for m in metrics)
    # one evaluation per quality value of each epoch's rows (unit % or none), none of the per-batch rows
    epoch_rows = [
        r for _, r in _records() if r["type"] == "LOG" and isinstance(r["step"], list) and len(r["step"]) == 1
    ]
    qualities = [k for r in epoch_rows for k in r["data"] if k.startswith("val.") and k not in measures]
    assert len(evals) == len(qualities) == 3 * EXPECTED["epochs"]
    (run,) = _runs(store)
    assert run["final_accuracy"]["metric"] == "top1_accuracy"
    assert run["final_accuracy"]["split"] == "validation"
    assert run["final_accuracy"]["value"] == pytest.approx(EXPECTED["final_top1"], rel=1e-6)
    (attrs,) = _query(store, "SELECT attrs FROM runs")[0]
    imported = json.loads(attrs)["imported"]
    last = next(r["data"] for r in reversed(epoch_rows) if "val.total_ips" in r["data"])
    assert imported["validation_measures"]["val.total_ips"] == pytest.approx(last["val.total_ips"])


def test_the_tools_own_times_are_claims_beside_the_logs_window(store: Path) -> None:
    (attrs,) = _query(store, "SELECT attrs FROM runs")[0]
    start = json.loads(attrs)
    claims, imported = start["claims"], start["imported"]
    assert claims["e2e_train_time_s"] == pytest.approx(EXPECTED["e2e_train_time_s"])
    assert claims["raw_train_time_s"] == pytest.approx(EXPECTED["raw_train_time_s"])
    summary = [r["data"] for _, r in _records() if r["type"] == "LOG" and r["step"] == []]
    assert claims["samples_per_s"] == pytest.approx(
        next(d["train.total_ips"] for d in summary if "train.total_ips" in d)
    )
    assert (
        "first PARAMETER row" in imported["time_from"]
        and "data loading is inside it" in imported["time_from"]
    )
    assert "end-to-end time" in imported["time_from"]
    (run,) = _runs(store)
    # the log's window starts after the tool's clock did (its set-up before the first row)
    assert run["time_to_train_s"] < EXPECTED["e2e_train_time_s"]
    # HS205's summaries: the training rates, not the validation pass's
    assert set(imported["summaries"]["rates"]) == {"train.total_ips", "train.compute_ips"}


def test_impossible_values_are_quarantined_by_line_and_field(tmp_path: Path) -> None:
    """The real log changed in memory: a NaN loss, a negative data time, a top-1 of 150 %."""
    lines = LOG.read_text().splitlines()
    train = _train_rows()
    (nan_at, nan_row) = next((n, r) for n, r in train[10:] if "train.loss" in r["data"])
    (neg_at, neg_row) = next((n, r) for n, r in train[20:] if "train.data_time" in r["data"])
    (acc_at, acc_row) = next(
        (n, r) for n, r in _records() if r["type"] == "LOG" and r["step"] == [0] and "val.top1" in r["data"]
    )
    nan_row["data"]["train.loss"] = math.nan
    neg_row["data"]["train.data_time"] = -0.25
    acc_row["data"]["val.top1"] = 150.0
    for at, row in ((nan_at, nan_row), (neg_at, neg_row), (acc_at, acc_row)):
        lines[at - 1] = "DLLL " + json.dumps(row)  # json writes NaN as dllogger's json.dumps does
    path = tmp_path / "dllogger.json"
    path.write_text("\n".join(lines) + "\n")
    store = tmp_path / "s.duckdb"
    code, out = _cli("ingest", str(path), "--store", str(store))
    assert code == 3 and "3 lines quarantined" in out, out  # landed, its bad lines named
    got = dict(_query(store, "SELECT line, reason FROM quarantine"))
    assert set(got) == {nan_at, neg_at, acc_at}, got
    assert "'train.loss'" in got[nan_at] and "nan" in got[nan_at]
    assert "'train.data_time'" in got[neg_at] and "-0.25" in got[neg_at]
    assert "'val.top1'" in got[acc_at] and "150" in got[acc_at]
    # the iterations still land, without what could not be
    assert _query(store, "SELECT count(*), count(t_data) FROM steps") == [
        (EXPECTED["iterations"], EXPECTED["iterations"] - 1)
    ]
    assert _query(store, "SELECT count(*) FROM evals WHERE epoch = 0 AND metric = 'top1_accuracy'") == [(0,)]
