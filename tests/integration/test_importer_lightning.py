"""Lightning's CSVLogger metrics.csv with ThroughputMonitor, written by real Lightning on 2 CPU ranks
(tests/data/imported/lightning-throughput, its README says how).

In process (conftest's ``cli``). Expected numbers come from what the training script counted itself
(``expected.json``) or from the log read with a few lines of ``csv`` here, never from the importer's helpers. A log
that must be wrong is the real one changed in memory, and each test says what it changed.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, cli, query

FIXTURE = REPO / "tests" / "data" / "imported" / "lightning-throughput"
METRICS = FIXTURE / "metrics.csv"
CLAIM = "rank 0's × world size"


def _ingest(store: Path, *paths: Path, code: int = 0) -> str:
    got = cli("ingest", *map(str, paths), "--store", str(store), "-v")
    assert got.returncode == code, got.stdout + got.stderr
    return got.stdout + got.stderr


def _runs(store: Path) -> list[dict[str, Any]]:
    got = cli("runs", "-f", "json", "--store", str(store))
    assert got.returncode == 0, got.stdout + got.stderr
    runs: list[dict[str, Any]] = json.loads(got.stdout)
    return runs


def _lint(store: Path, codes: str) -> list[dict[str, Any]]:
    got = cli("lint", "--select", codes, "-f", "json", "--store", str(store))
    assert got.returncode in (0, 1), got.stdout + got.stderr
    return [f for f in json.loads(got.stdout) if isinstance(f, dict) and f.get("outcome")]


def _attrs(store: Path, run_id: str) -> dict[str, Any]:
    (row,) = query(store, f"SELECT attrs FROM runs WHERE run_id = '{run_id}'")
    attrs: dict[str, Any] = json.loads(row[0])
    return attrs


def _rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text.removeprefix("\ufeff"))))


def _changed(tmp_path: Path, edit: Any, bom: bool = False) -> tuple[Path, list[str]]:
    """The real metrics.csv (and its hparams.yaml) in a folder of tmp_path, its lines changed by ``edit`` (the
    list of lines, the header first: line n of the file is index n - 1)."""
    lines = METRICS.read_text(encoding="utf-8").splitlines()
    edit(lines)
    folder = tmp_path / "lightning"
    folder.mkdir()
    (folder / "hparams.yaml").write_bytes((FIXTURE / "hparams.yaml").read_bytes())
    path = folder / "metrics.csv"
    path.write_text(("\ufeff" if bom else "") + "\n".join(lines) + "\n", encoding="utf-8")
    return path, lines


def _set(lines: list[str], index: int, column: str, value: str) -> None:
    """Line ``index`` (0-based) with ``column``'s field set to ``value``."""
    header = lines[0].split(",")
    fields = lines[index].split(",")
    fields[header.index(column)] = value
    lines[index] = ",".join(fields)


def _line_of(lines: list[str], column: str, nth: int = 0) -> int:
    """The 0-based index of the nth line whose ``column`` is filled."""
    at = lines[0].split(",").index(column)
    return [i for i, line in enumerate(lines) if i and line.split(",")[at]][nth]


def test_throughput_monitor_gives_world_size_steps_samples_and_time(tmp_path: Path) -> None:
    expected = json.loads((FIXTURE / "expected.json").read_text())
    rows = _rows(METRICS.read_text())
    timed = [r for r in rows if r["train/time"]]
    store = tmp_path / "s.duckdb"
    out = _ingest(store, FIXTURE)
    assert (
        "read as Lightning CSVLogger metrics.csv" in out and "hparams.yaml: read with the metrics.csv" in out
    )
    (run,) = _runs(store)
    rid = run["run_id"]
    # the world size: the ratio of the tool's global to its per-device rate, what the script's Trainer had
    assert run["world_size"] == expected["world_size"] == 2
    steps = query(
        store,
        f"SELECT step, samples, t_total, iterations, warmup, time FROM steps WHERE run_id = '{rid}' ORDER BY seq",
    )
    assert len(steps) == len(timed) and [s[0] for s in steps] == [int(r["step"]) for r in timed]
    assert sum(s[3] for s in steps) == expected["batches_per_rank"][0] == int(timed[-1]["train/batches"])
    assert [s[4] for s in steps] == [True] + [False] * (len(steps) - 1)  # the first holds the start
    # samples: rank 0's, train/samples' growth; what rank 0 counted itself
    assert sum(s[1] for s in steps) == expected["samples_per_rank"][0] == int(timed[-1]["train/samples"])
    assert {s[1] / s[3] for s in steps} == set(expected["samples_per_rank_per_step"][0])
    assert run["local_batch_size"] == expected["samples_per_rank_per_step"][0][0]
    # time: the step events add up to the last train/time, placed on it; within 5 % of the script's own clock
    assert sum(s[2] for s in steps) == pytest.approx(float(timed[-1]["train/time"]))
    (start,) = query(store, f"SELECT started_at FROM runs WHERE run_id = '{rid}'")[0]
    assert [s[5] - start for s in steps] == [pytest.approx(float(r["train/time"]), abs=1e-3) for r in timed]
    assert sum(s[2] for s in steps) == pytest.approx(expected["train_time_s_per_rank"][0], rel=0.05)
    # the tool's global rate is a claim, named for what it is
    claims = _attrs(store, rid)["claims"]
    rated = [r for r in timed if r["train/samples_per_sec"]]
    assert claims["samples_per_s_is"] == CLAIM and claims["from"].startswith(CLAIM)
    assert claims["samples_per_s"] == pytest.approx(float(rated[-1]["train/samples_per_sec"]))
    assert claims["rank0_samples_per_s"] == pytest.approx(float(rated[-1]["train/device/samples_per_sec"]))
    # the final accuracy is the last val_acc the script saw Lightning log
    assert run["final_accuracy"] == {
        "split": "validation",
        "metric": "accuracy",  # val_acc, named as the Lightning callback names it
        "value": expected["final_val_acc"],
    }
    evals = query(store, f"SELECT metric, value FROM evals WHERE run_id = '{rid}' ORDER BY seq")
    from_csv = [
        ({"val_acc": "accuracy"}.get(k, k.removeprefix("val_")), float(v))
        for r in rows
        for k, v in r.items()
        if k.startswith("val_") and v
    ]
    assert evals == from_csv and len(evals) == 2 * expected["epochs"]
    # no end marker: no stop is made up, the reason says so; what is still unknown is listed
    assert run["status"] == "end_unknown" and run["time_to_train_s"] is None
    assert (
        "does not say how or when the run ended" in run["reason"]
        and f"step {timed[-1]['step']}" in run["reason"]
    )
    unknown = _attrs(store, rid)["imported"]["unknown"]
    assert not [u for u in unknown if u.startswith("world_size")]
    assert any(u.startswith("wall clock") for u in unknown) and "how the run ended" in unknown
    # rank 0's numbers of a 2-rank run: HS215 says so
    outcomes = {f["code"]: f["outcome"] for f in _lint(store, "HS215") if rid in f["runs"]}
    assert outcomes == {"HS215": "fail"}


def test_impossible_values_are_quarantined_by_line_and_field(tmp_path: Path) -> None:
    """The real log with the first val_acc set to -5, the last val_loss to nan and one train/time to -1."""
    edits: dict[str, int] = {}

    def hostile(lines: list[str]) -> None:
        edits["acc"], edits["loss"] = _line_of(lines, "val_acc"), _line_of(lines, "val_loss", 1)
        edits["time"] = _line_of(lines, "train/time", 3)
        _set(lines, edits["acc"], "val_acc", "-5")
        _set(lines, edits["loss"], "val_loss", "nan")
        _set(lines, edits["time"], "train/time", "-1")

    path, _ = _changed(tmp_path, hostile)
    store = tmp_path / "s.duckdb"
    out = _ingest(store, path, code=3)  # lines quarantined: exit 3, the rest landed
    assert "3 lines quarantined" in out, out
    got = sorted(query(store, "SELECT line, reason FROM quarantine"))
    assert [line for line, _ in got] == sorted(i + 1 for i in edits.values())
    reasons = dict(got)
    assert "'val_acc'" in reasons[edits["acc"] + 1] and "-5.0 is below 0" in reasons[edits["acc"] + 1]
    assert "'val_loss'" in reasons[edits["loss"] + 1] and "no finite number" in reasons[edits["loss"] + 1]
    assert "'train/time'" in reasons[edits["time"] + 1] and "-1.0 is below 0" in reasons[edits["time"] + 1]
    rows = _rows(path.read_text())
    (run,) = _runs(store)
    # the rest landed: the other evaluations, the last val_acc the run's accuracy; the other rows' steps
    evals = query(store, "SELECT metric, value FROM evals ORDER BY seq")
    val = [r for r in rows if r["val_acc"]]
    assert evals == [("loss", float(val[0]["val_loss"])), ("accuracy", float(val[1]["val_acc"]))]
    assert run["final_accuracy"]["value"] == float(val[1]["val_acc"])
    timed = [r for r in rows if r["train/time"]]
    steps = query(store, "SELECT sum(samples), count(*), sum(t_total) FROM steps")[0]
    assert steps[0] == int(timed[-1]["train/samples"]) and steps[1] == len(timed) - 1
    assert steps[2] == pytest.approx(float(timed[-1]["train/time"]))


def test_a_ragged_row_and_a_byte_order_mark(tmp_path: Path) -> None:
    """The real log written with a UTF-8 BOM (Excel's) and one ThroughputMonitor row given a field more than the
    header: the BOM is read past, the row is quarantined whole by line and the rest of the file read."""
    at: dict[str, int] = {}

    def ragged(lines: list[str]) -> None:
        at["row"] = _line_of(lines, "train/time", 5)
        lines[at["row"]] += ",surplus"

    path, lines = _changed(tmp_path, ragged, bom=True)
    store = tmp_path / "s.duckdb"
    out = _ingest(store, path, code=3)
    assert "read as Lightning CSVLogger metrics.csv" in out
    ((line, reason),) = query(store, "SELECT line, reason FROM quarantine")
    width = len(lines[0].split(","))
    assert line == at["row"] + 1 and f"a row of {width + 1} fields where the header has {width}" in reason
    rows = list(csv.reader(io.StringIO(METRICS.read_text())))
    timed = [r for r in rows[1:] if r[rows[0].index("train/time")]]
    (run,) = _runs(store)
    assert run["world_size"] == 2 and run["name"] == "lightning"
    steps = query(store, "SELECT count(*), sum(samples) FROM steps")[0]
    # the ragged row's samples are in the next row's growth: none lost, none counted twice
    assert steps == (len(timed) - 1, int(timed[-1][rows[0].index("train/samples")]))
    assert query(store, "SELECT count(*) FROM evals") == [(4,)]
    columns = _attrs(store, run["run_id"])["imported"]["columns"]
    assert columns[0] == "train/batches"  # the BOM is no part of the first column's name


def test_world_size_unknown_when_the_ratio_is_not_one_whole_number(tmp_path: Path) -> None:
    """The real log with one row's train/samples_per_sec set to 1.5 x its per-device rate, and its
    train/samples_per_sec column renamed test/samples_per_sec (what ThroughputMonitor logs in trainer.test):
    the world size is unknown, never a guess, and a rate is never a test evaluation."""
    at: dict[str, int] = {}

    def inconsistent(lines: list[str]) -> None:
        header = lines[0].split(",")
        at["row"] = _line_of(lines, "train/samples_per_sec", 2)
        device = float(lines[at["row"]].split(",")[header.index("train/device/samples_per_sec")])
        _set(lines, at["row"], "train/samples_per_sec", repr(device * 1.5))

    path, _ = _changed(tmp_path, inconsistent)
    store = tmp_path / "s.duckdb"
    _ingest(store, path)
    (run,) = _runs(store)
    assert run["world_size"] is None
    (first, *_) = _attrs(store, run["run_id"])["imported"]["unknown"]
    assert first.startswith("world_size") and "not one whole number on every row" in first
    assert {f["outcome"] for f in _lint(store, "HS215")} == {"cannot_verify"}

    renamed = tmp_path / "renamed"
    renamed.mkdir()
    text = METRICS.read_text()
    header, rest = text.split("\n", 1)
    (renamed / "metrics.csv").write_text(
        header.replace("train/samples_per_sec", "test/samples_per_sec") + "\n" + rest
    )
    store = tmp_path / "renamed.duckdb"
    _ingest(store, renamed)
    assert query(store, "SELECT DISTINCT split FROM evals") == [("validation",)]
    (run,) = _runs(store)
    assert (
        run["world_size"] is None
    )  # no global rate left beside the per-device one on every row: not 1 either


def test_train_time_that_goes_back_starts_anew_and_says_so(tmp_path: Path) -> None:
    """The real log with its first train/time set past the second's (a value out of place, as a second fit into
    the same log would give): no step is lost, the row after it is read as a new start (a warm-up), and a warning
    names its line."""
    at: dict[str, int] = {}

    def out_of_place(lines: list[str]) -> None:
        at["first"], at["second"] = _line_of(lines, "train/time"), _line_of(lines, "train/time", 1)
        _set(lines, at["first"], "train/time", "100.0")

    path, _ = _changed(tmp_path, out_of_place)
    store = tmp_path / "s.duckdb"
    out = _ingest(store, path)
    assert f"train/time starts again at lines {at['second'] + 1} " in out
    timed = [r for r in _rows(path.read_text()) if r["train/time"]]
    steps = query(store, "SELECT t_total, warmup FROM steps ORDER BY seq")
    assert len(steps) == len(timed) and [w for _, w in steps][:3] == [True, True, False]
    assert steps[1][0] == pytest.approx(float(timed[1]["train/time"]))  # since the new start
    assert sum(t for t, _ in steps) == pytest.approx(100.0 + float(timed[-1]["train/time"]))


def test_world_of_one_where_only_the_device_rates_are_logged(tmp_path: Path) -> None:
    """The real log with its train/samples_per_sec column taken out, as Lightning writes it for a world of one
    (lightning.fabric.utilities.throughput: "Global metrics are not included if the world size is 1"): a world
    of 1, said how, and no claim of a global rate."""

    def one(lines: list[str]) -> None:
        at = lines[0].split(",").index("train/samples_per_sec")
        for i, line in enumerate(lines):
            fields = line.split(",")
            lines[i] = ",".join(fields[:at] + fields[at + 1 :])

    path, _ = _changed(tmp_path, one)
    store = tmp_path / "s.duckdb"
    _ingest(store, path)
    (run,) = _runs(store)
    assert run["world_size"] == 1
    imported = _attrs(store, run["run_id"])["imported"]
    assert "global metrics are not included if the world size is 1" in imported["world_size_from"]
    assert not any(str(u).startswith("world_size") for u in imported["unknown"])


def test_rates_of_one_rank_of_two_are_named_so(tmp_path: Path) -> None:
    """The 2-rank log holds rank 0's steps only: `runs` gives those ranks' rate, says so with HS215, and gives no
    per-worker rate (rank 0's rate divided by the world would be half a rank's)."""
    store = tmp_path / "s.duckdb"
    _ingest(store, FIXTURE)
    (run,) = _runs(store)
    assert run["world_size"] == 2 and run["samples_per_s"] is not None
    assert run["samples_per_s_per_worker"] is None and run["tokens_per_s_per_worker"] is None
    assert "from the steps of 1 of the run's 2 ranks" in run["rates_are"] and "HS215" in run["rates_are"]
