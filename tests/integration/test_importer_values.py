"""Impossible values in the logs real tools write: never landed in silence, never lost in silence.

Each case is a real log of tests/data/imported changed in memory (the test says how); expected values are read
from that log with a few lines of ``json``/``csv`` here, never from the importer's helpers.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import math
import re
from pathlib import Path
from typing import Any

import duckdb
import pytest

from tests.conftest import REPO, cli, query

DATA = REPO / "tests" / "data" / "imported"
HF = DATA / "hf-gpt2" / "trainer_state.json"
CODECARBON = DATA / "codecarbon"


def _ingest(store: Path, *paths: Path, code: int = 0) -> str:
    got = cli("ingest", *map(str, paths), "--store", str(store), "-v")
    assert got.returncode == code, got.stdout + got.stderr
    return got.stdout + got.stderr


def _json(*args: str) -> Any:
    got = cli(*args)
    assert got.returncode == 0, got.stdout + got.stderr
    return json.loads(got.stdout)


def _state_with(tmp_path: Path, change: Any) -> Path:
    """The real trainer_state.json, changed by ``change`` (on its parsed log_history), written indented as the
    Trainer writes it."""
    state = json.loads(HF.read_text())
    change(state["log_history"])
    folder = tmp_path / "hf"
    folder.mkdir()
    path = folder / "trainer_state.json"
    path.write_text(json.dumps(state, indent=2, sort_keys=True) + "\n")
    return path


def test_hf_nan_eval_loss_is_quarantined_with_its_field_and_the_rest_lands(tmp_path: Path) -> None:
    evals = [e for e in json.loads(HF.read_text())["log_history"] if "eval_loss" in e]
    assert len(evals) >= 2, "the fixture evaluates each epoch"

    def nan_first(history: list[dict[str, Any]]) -> None:
        next(e for e in history if "eval_loss" in e)["eval_loss"] = math.nan

    path = _state_with(tmp_path, nan_first)
    store = tmp_path / "s.duckdb"
    out = _ingest(store, path, code=3)  # a line quarantined: exit 3, the rest landed
    assert "1 lines quarantined" in out or "1 line quarantined" in out, out
    (reason,) = (r for (r,) in query(store, "SELECT reason FROM quarantine"))
    assert "'eval_loss'" in reason and "nan" in reason and "no finite number" in reason
    # the line is the entry's own "step" line in the file
    (line,) = (n for (n,) in query(store, "SELECT line FROM quarantine"))
    assert '"step"' in path.read_text().splitlines()[line - 1]
    landed = query(store, "SELECT value FROM evals WHERE metric = 'loss' ORDER BY value")
    assert [v for (v,) in landed] == sorted(e["eval_loss"] for e in evals[1:])


def test_hf_train_runtime_zero_is_no_run_of_zero_seconds(tmp_path: Path) -> None:
    def zero(history: list[dict[str, Any]]) -> None:
        next(e for e in history if "train_runtime" in e)["train_runtime"] = 0

    store = tmp_path / "s.duckdb"
    out = _ingest(store, _state_with(tmp_path, zero), code=3)
    assert "train_runtime is no time" in out
    (reason,) = (r for (r,) in query(store, "SELECT reason FROM quarantine"))
    assert "'train_runtime'" in reason and "not above 0" in reason
    (run,) = _json("runs", "-f", "json", "--store", str(store))
    assert run["status"] != "success" and run["time_to_train_s"] is None


def _codecarbon(tmp_path: Path, edit: Any, bom: bool = False) -> tuple[Path, list[dict[str, str]]]:
    """The real emissions.csv with its rows changed by ``edit`` (a list of row dicts, the header kept)."""
    text = (CODECARBON / "emissions.csv").read_text()
    rows = list(csv.DictReader(io.StringIO(text)))
    header = text.splitlines()[0].split(",")
    edit(rows)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, header, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    folder = tmp_path / "cc"
    folder.mkdir()
    path = folder / "emissions.csv"
    path.write_text(("\ufeff" if bom else "") + buf.getvalue(), encoding="utf-8")
    return path, rows


def test_codecarbon_negative_and_overflowing_energy_quarantined_by_field(tmp_path: Path) -> None:
    def hostile(rows: list[dict[str, str]]) -> None:
        rows[0]["energy_consumed"] = "-5"
        rows[1]["energy_consumed"] = "1e308"

    path, rows = _codecarbon(tmp_path, hostile)
    store = tmp_path / "s.duckdb"
    _ingest(store, path, code=3)
    got = sorted(query(store, "SELECT line, reason FROM quarantine"))
    assert [line for line, _ in got] == [2, 3]
    assert "'energy_consumed'" in got[0][1] and "-5.0 is below 0" in got[0][1]
    assert "'energy_consumed'" in got[1][1] and "no finite number" in got[1][1]  # 1e308 kWh is inf joules
    records = query(store, "SELECT energy_j, method FROM energy_records")
    assert len(records) == 1  # the third row alone
    assert records[0][0] == pytest.approx(float(rows[2]["energy_consumed"]) * 3.6e6)
    assert all(math.isfinite(j) for j, _ in records)


def test_codecarbon_label_says_what_its_row_says(tmp_path: Path) -> None:
    store = tmp_path / "s.duckdb"
    _ingest(store, CODECARBON / "emissions.csv")
    with (CODECARBON / "emissions.csv").open() as f:
        row = next(csv.DictReader(f))
    ram_share = float(row["ram_energy"]) / float(row["energy_consumed"])
    (method,) = (m for (m,) in query(store, "SELECT method FROM energy_records WHERE line = 2"))
    assert f"CodeCarbon {row['codecarbon_version']}" in method and "machine mode" in method
    assert (
        "RAM 20.0 W (CodeCarbon's model, never measured" in method
        and f"{ram_share:.0%} of the energy" in method
    )
    assert "the row does not say which" in method and "no GPU counted" in method
    assert "TDP table" not in method  # the row does not say a TDP table was used


def test_codecarbon_with_a_byte_order_mark_and_a_ragged_row(tmp_path: Path) -> None:
    """Excel writes a UTF-8 BOM: still read as CodeCarbon's; a row with an extra field is named by its line."""

    def ragged(rows: list[dict[str, str]]) -> None:
        rows[1]["project_name"] = "resnet18-runner"

    path, rows = _codecarbon(tmp_path, ragged, bom=True)
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[2] += ",surplus"  # the second data row: one field more than the header
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    store = tmp_path / "s.duckdb"
    out = _ingest(store, path, code=3)
    assert "read as CodeCarbon emissions.csv" in out
    ((line, reason),) = query(store, "SELECT line, reason FROM quarantine")
    header = len(lines[0].split(","))
    assert line == 3 and f"a row of {header + 1} fields where the header has {header}" in reason
    assert query(store, "SELECT count(*) FROM energy_records") == [(len(rows) - 1,)]


def test_runs_json_gives_the_energy_show_gives(tmp_path: Path) -> None:
    """One energy for a run whatever reads it: `runs --format json` and `show` (the report's own source)."""
    store = tmp_path / "s.duckdb"
    _ingest(store, CODECARBON)
    runs = _json("runs", "-f", "json", "--store", str(store))
    measured = 0
    for run in runs:
        shown = _json("show", run["run_id"], "-f", "json", "--store", str(store))["energy_to_train"]
        assert run["energy_to_train_j"] == shown.get("joules")
        assert run["energy_source"] == shown["source"]
        measured += run["energy_to_train_j"] is not None
    assert measured == 1  # the runner's 3-minute training fills its tracker's window


MEGATRON = DATA / "megatron" / "megatron.log.gz"
DLLOGGER = DATA / "dllogger" / "dllogger.json"
TITAN_LINE = (
    "[rank0]:[titan] 2026-11-25 23:51:21,004 - root - INFO - torchtitan version: 0.2.2 (0.0.0 means __version__ "
    "is not defined correctly)."
)  # a line of tests/data/imported/torchtitan-console-r022.log.gz


def _megatron_iterations(text: str) -> int:
    return len(re.findall(r"^ \[[^\]]+\] iteration\s+\d+/", text, re.MULTILINE))


def test_a_megatron_log_with_a_torchtitan_looking_line_is_read_as_megatron(tmp_path: Path) -> None:
    text = gzip.decompress(MEGATRON.read_bytes()).decode()
    path = tmp_path / "train.log"
    path.write_text(TITAN_LINE + "\n" + text)  # the line first: the torchtitan reader is asked first
    store = tmp_path / "s.duckdb"
    out = _ingest(store, path)
    assert "read as Megatron-LM" in out and "also looks like torchtitan" in out, out
    assert query(store, "SELECT count(*) FROM steps") == [(_megatron_iterations(text),)]


def test_a_log_whose_first_mib_is_noise_is_still_found(tmp_path: Path) -> None:
    text = gzip.decompress(MEGATRON.read_bytes()).decode()
    noise = "".join(
        f"/usr/lib/python3/site.py:{i}: UserWarning: something is deprecated\n" for i in range(25_000)
    )
    assert len(noise.encode()) > 1 << 20
    path = tmp_path / "train.log"
    path.write_text(noise + text)
    store = tmp_path / "s.duckdb"
    out = _ingest(store, path)
    assert "read as Megatron-LM" in out, out
    assert query(store, "SELECT count(*) FROM steps") == [(_megatron_iterations(text),)]


def test_a_dllogger_log_with_an_mllog_line_is_refused_naming_both(tmp_path: Path) -> None:
    mllog = ':::MLLOG {"namespace": "", "time_ms": 1700000000000, "event_type": "POINT_IN_TIME", "key": "cache_clear", "value": true, "metadata": {"file": "train.py", "lineno": 1}}'
    lines = DLLOGGER.read_text().splitlines()
    path = tmp_path / "dllogger.json"
    path.write_text("\n".join([*lines[:3], mllog, *lines[3:]]) + "\n")
    store = tmp_path / "s.duckdb"
    out = _ingest(store, path, code=3)
    assert "in 2 formats" in out and "MLPerf log" in out and "NVIDIA DLLogger log" in out, out
    assert "nothing of it landed" in out
    assert query(store, "SELECT count(*) FROM runs") == [(0,)]


KINETO = DATA / "kineto-cpu"


def test_profiler_traces_linked_to_no_run_are_listed(tmp_path: Path) -> None:
    store = tmp_path / "s.duckdb"
    out = _ingest(store, KINETO / "rank0_trace.json.gz", KINETO / "rank1_trace.json.gz")
    assert "`honestscale profiles` lists it" in out
    listed = _json("profiles", "-f", "json", "--store", str(store))
    assert len(listed) == 2 and all(p["run_id"] is None for p in listed)
    for p in listed:
        trace = json.loads(gzip.decompress(Path(p["path"]).read_bytes()))
        steps = {
            e["name"] for e in trace["traceEvents"] if str(e.get("name", "")).startswith("ProfilerStep#")
        }
        assert p["steps"] == len(steps) and p["rank"] == trace["distributedInfo"]["rank"]
    table = cli("profiles", "--store", str(store))
    assert table.returncode == 0 and "2 linked to no run" in table.stdout


def test_a_trace_cut_short_is_named_not_taken_for_a_reader_bug(tmp_path: Path) -> None:
    text = gzip.decompress((KINETO / "rank0_trace.json.gz").read_bytes())
    path = tmp_path / "rank0_trace.json"
    path.write_bytes(text[: len(text) // 2])
    store = tmp_path / "s.duckdb"
    out = _ingest(store, path, code=3)
    assert "a trace cut short" in out and "ingest it again once it is whole" in out, out
    assert "report it with the file" not in out


def test_a_right_to_left_override_is_shown_escaped(tmp_path: Path) -> None:
    """U+202E in a file name and in a metric's name: printed as a visible escape, never as the control."""

    def renamed(history: list[dict[str, Any]]) -> None:
        for e in history:
            if "eval_loss" in e:
                e["eval_ssol\u202e"] = e.pop("eval_loss")

    path = _state_with(tmp_path, renamed)
    evil = path.with_name("trainer_state\u202enosj.json")
    path.rename(evil)
    store = tmp_path / "s.duckdb"
    out = _ingest(store, evil)
    assert "\u202e" not in out and "\\u202e" in out, out
    (run,) = _json("runs", "-f", "json", "--store", str(store))
    shown = cli("show", run["run_id"], "--store", str(store))
    assert shown.returncode == 0 and "\u202e" not in shown.stdout and "ssol\\u202e" in shown.stdout


def test_a_store_an_older_reader_filled_is_put_right(tmp_path: Path) -> None:
    """Each file records the reader that landed it; one an earlier reader landed is named by any ingest, with the
    command that reads it again, and read again when named (its events replaced, never doubled)."""
    store = tmp_path / "s.duckdb"
    _ingest(store, HF)
    ((reader,),) = query(store, "SELECT reader FROM ingested_files")
    assert reader is not None and reader.startswith("hf-trainer-state@")
    events = query(store, "SELECT count(*) FROM events")
    # as a store filled before readers were versioned holds it (in place: the column empty)
    con = duckdb.connect(str(store))
    con.execute("UPDATE ingested_files SET reader = NULL")
    con.close()
    out = _ingest(store, CODECARBON / "emissions.csv")
    assert (
        "1 file(s) in the store were landed by an earlier reader" in out and f"honestscale ingest {HF}" in out
    )
    again = _ingest(store, HF)
    assert "read again: a reader from before readers were versioned landed it" in again, again
    assert query(store, "SELECT count(*) FROM events") == events
    assert query(store, "SELECT reader FROM ingested_files WHERE path = ?", [str(HF)]) == [(reader,)]
    quiet = _ingest(store, HF)
    assert "earlier reader" not in quiet and "1 files (1 unchanged)" in quiet


def test_the_log_landed_first_is_still_told_to_be_the_recorded_training(tmp_path: Path) -> None:
    store = tmp_path / "s.duckdb"
    _ingest(store, HF)
    runs = _json("runs", "-f", "json", "--store", str(store))
    assert [r["superseded"] for r in runs] == [None]  # alone: its own run
    out = _ingest(store, HF.parent / "recorded")
    assert "counted once, as that run" in out
    by_source = {r["source"]: r for r in _json("runs", "-f", "json", "--store", str(store))}
    assert by_source["native"]["superseded"] is None
    assert by_source["hf-trainer-state"]["superseded"].startswith(
        f"the same training as run {by_source['native']['run_id']}"
    )
