"""The DLLogger reader on a log written by NVIDIA DeepLearningExamples' own image-classification code
(tests/data/imported/dllogger-dle: ``make_dllogger_dle.py`` drove DLE's ``train_loop`` and ``Logger`` with the real
dllogger package, and wrote ``expected.json`` with what the training measured as it went).

Expected values come from ``expected.json`` or from a few lines of JSON parsing of the log here, never from the
reader. DLE logs each iteration in two ``dllogger.log`` calls (DEFAULT: loss and rates; VERBOSE: the phase times),
both written by its VERBOSE JSON backend: one step each, not two.

tests/data/imported/dllogger-dle-pf20 is the same script with ``--print-freq 20`` (DLE's convergence default) and
batch 16: a row every 20 iterations, each the mean of those 20, the first of each epoch at iteration 20 (DLE numbers
them from 1), and an epoch's last 7 of 87 iterations in no row.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from tests.importing import DATA
from tests.importing import ingest as _ingest
from tests.importing import query as _query
from tests.importing import run_cli as _cli
from tests.importing import runs as _runs

DLE = DATA / "dllogger-dle"
LOG = DLE / "dllogger.json"
EXPECTED: dict[str, Any] = json.loads((DLE / "expected.json").read_text())
PF20 = DATA / "dllogger-dle-pf20"
PF20_EXPECTED: dict[str, Any] = json.loads((PF20 / "expected.json").read_text())


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


@pytest.fixture(scope="module")
def store_pf20(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("dle-pf20") / "s.duckdb"
    assert "read as NVIDIA DLLogger log" in _ingest(path, PF20 / "dllogger.json")
    return path


def _pf20_rows() -> list[dict[str, Any]]:
    return [
        r
        for _, r in _records(PF20 / "dllogger.json")
        if r["type"] == "LOG" and isinstance(r["step"], list) and len(r["step"]) in (1, 2)
    ]


def test_the_pf20_fixture_logs_every_20th_iteration_and_the_epochs_tail_only_in_its_means() -> None:
    """What the reader must meet, in the log itself: rows at iterations 20, 40, 60, 80 of each epoch of 87 (two
    rows each), their times means over 20 iterations; iterations 81-87 only in the ``[epoch]`` rows' means."""
    e = PF20_EXPECTED
    rows = _pf20_rows()
    keys = [r["step"] for r in rows if len(r["step"]) == 2]
    assert keys[::2] == keys[1::2] == [r["step"] for r in e["logged_rows"]]
    assert [k[1] for k in keys[::2]] == [20, 40, 60, 80] * e["epochs"] and e["iterations_per_epoch"] == 87
    assert all(r["iterations"] == e["print_freq"] == 20 for r in e["logged_rows"])
    assert e["logged_iterations"] + len(e["unlogged_step_keys"]) == e["iterations"] == 87 * e["epochs"]
    timed = [r["data"] for r in rows if len(r["step"]) == 2 and "train.compute_time" in r["data"]]
    for got, row in zip(timed, e["logged_rows"], strict=True):
        assert got["train.compute_time"] * 20 == pytest.approx(row["compute_time_s"])
        assert got["train.data_time"] * 20 == pytest.approx(row["data_time_s"])
    per_epoch = [
        r["data"]["train.compute_time"]
        for r in rows
        if len(r["step"]) == 1 and "train.compute_time" in r["data"]
    ]
    times = e["compute_time_s"]
    assert per_epoch == pytest.approx([sum(times[i * 87 : (i + 1) * 87]) / 87 for i in range(e["epochs"])])


def test_a_row_every_20_iterations_is_a_step_of_20_with_its_samples_and_phases(store_pf20: Path) -> None:
    e = PF20_EXPECTED
    steps = _query(
        store_pf20,
        "SELECT epoch, iterations, samples, t_total, t_data, t_compute, warmup FROM steps ORDER BY step",
    )
    rows = e["logged_rows"]
    assert [s[0] for s in steps] == [r["step"][0] for r in rows]
    # each epoch's first row (iteration 20) is 20 iterations, as the others: not 1
    assert [s[1] for s in steps] == [r["iterations"] for r in rows]
    assert sum(s[1] for s in steps) == e["logged_iterations"]
    assert [s[2] for s in steps] == [r["samples"] for r in rows]
    assert sum(s[2] for s in steps) == e["logged_samples"]
    # the logged per-iteration means times the row's iterations: the script's own sums of what train() measured
    assert [s[4] for s in steps] == pytest.approx([r["data_time_s"] for r in rows])
    assert [s[5] for s in steps] == pytest.approx([r["compute_time_s"] for r in rows])
    assert sum(s[4] for s in steps) == pytest.approx(e["logged_data_time_sum_s"])
    assert sum(s[5] for s in steps) == pytest.approx(e["logged_compute_time_sum_s"])
    assert all(s[5] <= s[3] for s in steps)  # 20 iterations' compute inside the 20 iterations' time
    assert [s[6] for s in steps] == [True] + [False] * (len(steps) - 1)
    (run,) = _runs(store_pf20)
    assert run["local_batch_size"] == e["samples_per_iteration"] == 16
    # the steady rate: the script's clock over the iterations of the rows after the first
    at = {tuple(k): i for i, k in enumerate(e["step_keys"])}
    covered = [
        i
        for r in rows[1:]
        for i in range(at[tuple(r["step"])] - r["iterations"] + 1, at[tuple(r["step"])] + 1)
    ]
    rate = sum(e["samples"][i] for i in covered) / sum(e["iteration_wall_s"][i] for i in covered)
    assert run["samples_per_s"] == pytest.approx(rate, rel=0.01)
    (attrs,) = _query(store_pf20, "SELECT attrs FROM runs")[0]
    between = json.loads(attrs)["imported"]["between_rows"]
    assert "up to 20 iterations apart" in between and "in no step" in between
